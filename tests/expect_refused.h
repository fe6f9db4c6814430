#pragma once
// Asserts that bad input is refused the house way: std::invalid_argument with a one-line message.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace mygpt {

// Runs f, which must throw std::invalid_argument whose message is one line holding every needle.
template <class F>
void expect_refused(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error mentioning " << needles.front();
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const auto& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  }
}

}  // namespace mygpt
