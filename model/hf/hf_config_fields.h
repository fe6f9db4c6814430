#pragma once
// config.json's fields as the family mappings read them (model/hf/hf_folder.h), and the mappings themselves:
// each family turns the one parsed config.json into our config and its tensor maps. Every problem is one
// std::invalid_argument line naming the file and the field.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/hf/hf_folder.h"

namespace mygpt {

class HfConfigFields {
 public:
  // source: how messages name the object ("HF config '<path>'").
  HfConfigFields(const nlohmann::json& json, std::string source) : json_(json), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  // The value, or nullptr when absent or null (transformers' defaults then apply).
  const nlohmann::json* find(const std::string& key) const;
  // A positive integer up to max; absent: fallback, or "is missing" without one.
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t max) const;
  bool flag(const std::string& key, bool fallback) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  double number(const std::string& key, double fallback) const;
  const std::string& source() const { return source_; }
  const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
  std::string source_;
};

// A small JSON file (config, index) that must hold an object; `role` names it in messages.
nlohmann::json read_hf_json_object(const std::filesystem::path& path, const std::string& role);

// GPT-2 (model/hf/hf_gpt2.cpp): model_type gpt2 or absent.
HfMapping gpt2_mapping(const HfConfigFields& fields, int64_t vocab_multiple);
// NanoChat, Llama, Qwen3 (model/hf/hf_family.cpp).
HfMapping family_mapping(const HfConfigFields& fields, int64_t vocab_multiple);
// Whether model_type names one of family_mapping's classes.
bool is_family_model_type(const std::string& model_type);

}  // namespace mygpt
