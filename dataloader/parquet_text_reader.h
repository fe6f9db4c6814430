#pragma once
// The documents of a Parquet file's text column, read with Apache Arrow's C++ Parquet library a few
// thousand rows at a time (memory bounded by a batch, however large the file), behind plain types so
// that nothing else compiles against Arrow. parquet_text_reader.cpp is built where CMake finds Arrow;
// parquet_text_reader_unavailable.cpp elsewhere, which refuses every file in one line saying how to get it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mygpt {

// Whether this build reads Parquet (Arrow's library was found at configure time).
bool parquet_support_built();

class ParquetTextReader {
 public:
  // Opens `path` and finds its column `column` of strings (string, large_string, string_view, or a
  // dictionary of them). Throws std::invalid_argument naming the file: not Parquet, truncated, no such
  // column (its columns listed), a column of another type, or a build without Parquet.
  ParquetTextReader(const std::string& path, const std::string& column);
  ~ParquetTextReader();
  ParquetTextReader(const ParquetTextReader&) = delete;
  ParquetTextReader& operator=(const ParquetTextReader&) = delete;

  // The texts of the next rows in file order, nulls left out (counted); false at the end of the file.
  // Throws std::invalid_argument naming the file when a page cannot be read or decompressed.
  bool next(std::vector<std::string>& texts);
  uint64_t rows() const;       // in the file
  uint64_t rows_read() const;  // handed out or skipped so far
  uint64_t nulls() const;      // skipped so far
  // The column's bytes uncompressed (all row groups, from the footer): the size of its text, near enough.
  uint64_t text_bytes() const;

 private:
  struct Arrow;
  std::unique_ptr<Arrow> arrow_;
};

}  // namespace mygpt
