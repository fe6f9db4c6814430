// ParquetTextReader on Apache Arrow's C++ Parquet library: the one file that includes Arrow's headers.
#include "dataloader/parquet_text_reader.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>

#include <optional>
#include <stdexcept>
#include <string_view>

namespace mygpt {

bool parquet_support_built() { return true; }

namespace {

// Rows per batch read: a few MiB of FineWeb text, however large the row groups are.
constexpr int64_t kRowsPerBatch = 2048;

bool is_text_type(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW: return true;
    case arrow::Type::DICTIONARY:
      return is_text_type(*static_cast<const arrow::DictionaryType&>(type).value_type());
    default: return false;
  }
}

// The text at row i of a string, large_string or string_view array; none where it is null.
std::optional<std::string_view> text_at(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return std::nullopt;
  switch (array.type_id()) {
    case arrow::Type::STRING: return static_cast<const arrow::StringArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING: return static_cast<const arrow::LargeStringArray&>(array).GetView(i);
    case arrow::Type::STRING_VIEW: return static_cast<const arrow::StringViewArray&>(array).GetView(i);
    default: throw std::logic_error("a Parquet text column of an unexpected type");
  }
}

void append_texts(const arrow::Array& array, std::vector<std::string>& texts, uint64_t& nulls) {
  // A dictionary column's row names an entry of its dictionary; a null index or a null entry is null.
  const auto* dictionary =
      array.type_id() == arrow::Type::DICTIONARY ? static_cast<const arrow::DictionaryArray*>(&array) : nullptr;
  for (int64_t i = 0; i < array.length(); ++i) {
    std::optional<std::string_view> text;
    if (dictionary == nullptr) {
      text = text_at(array, i);
    } else if (!dictionary->IsNull(i)) {
      text = text_at(*dictionary->dictionary(), dictionary->GetValueIndex(i));
    }
    if (text) {
      texts.emplace_back(*text);
    } else {
      ++nulls;
    }
  }
}

}  // namespace

struct ParquetTextReader::Arrow {
  std::string path;
  std::unique_ptr<parquet::arrow::FileReader> file;
  std::unique_ptr<arrow::RecordBatchReader> batches;
  uint64_t rows = 0, rows_read = 0, nulls = 0, text_bytes = 0;

  // Arrow reports through exceptions (ParquetException) and Status results: both become one line.
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("input file '" + path + "' is not a readable Parquet file (" + what + ")");
  }
  template <typename T>
  T take(arrow::Result<T> result) const {
    if (!result.ok()) fail(result.status().message());
    return std::move(result).ValueUnsafe();
  }
  void check(const arrow::Status& status) const {
    if (!status.ok()) fail(status.message());
  }
};

ParquetTextReader::ParquetTextReader(const std::string& path, const std::string& column)
    : arrow_(std::make_unique<Arrow>()) {
  Arrow& a = *arrow_;
  a.path = path;
  try {
    auto input = a.take(arrow::io::ReadableFile::Open(path));
    parquet::ArrowReaderProperties properties;
    properties.set_batch_size(kRowsPerBatch);
    properties.set_use_threads(false);  // the tokenizer threads have the cores
    parquet::arrow::FileReaderBuilder builder;
    a.check(builder.Open(std::move(input)));
    builder.properties(properties);
    a.file = a.take(builder.Build());
    std::shared_ptr<arrow::Schema> schema;
    a.check(a.file->GetSchema(&schema));
    const int field = schema->GetFieldIndex(column);
    if (field < 0) {
      std::string names;
      for (const auto& f : schema->fields()) names += (names.empty() ? "" : ", ") + f->name();
      throw std::invalid_argument("input file '" + path + "' has no column '" + column + "' (--text-column); its columns: " +
                                  (names.empty() ? "none" : names));
    }
    const auto& type = *schema->field(field)->type();
    if (!is_text_type(type)) {
      throw std::invalid_argument("input file '" + path + "': column '" + column + "' holds " + type.ToString() +
                                  ", not strings (--text-column names the column of the documents)");
    }
    // The column's leaf in the Parquet schema (a flat string column is one leaf of the same name).
    const auto metadata = a.file->parquet_reader()->metadata();
    const int leaf = metadata->schema()->ColumnIndex(column);
    if (leaf < 0) a.fail("column '" + column + "' is not a flat column");
    a.rows = static_cast<uint64_t>(metadata->num_rows());
    std::vector<int> row_groups;
    for (int g = 0; g < metadata->num_row_groups(); ++g) {
      row_groups.push_back(g);
      a.text_bytes += static_cast<uint64_t>(metadata->RowGroup(g)->ColumnChunk(leaf)->total_uncompressed_size());
    }
    a.batches = a.take(a.file->GetRecordBatchReader(row_groups, {leaf}));
  } catch (const parquet::ParquetException& e) {
    a.fail(e.what());
  }
}

ParquetTextReader::~ParquetTextReader() = default;

bool ParquetTextReader::next(std::vector<std::string>& texts) {
  Arrow& a = *arrow_;
  texts.clear();
  try {
    std::shared_ptr<arrow::RecordBatch> batch;
    do {
      a.check(a.batches->ReadNext(&batch));
      if (!batch) {
        if (a.rows_read != a.rows) {
          a.fail("its pages hold " + std::to_string(a.rows_read) + " rows, its footer says " + std::to_string(a.rows));
        }
        return false;
      }
    } while (batch->num_rows() == 0);
    append_texts(*batch->column(0), texts, a.nulls);
    a.rows_read += static_cast<uint64_t>(batch->num_rows());
    return true;
  } catch (const parquet::ParquetException& e) {
    a.fail(e.what());
  }
}

uint64_t ParquetTextReader::rows() const { return arrow_->rows; }
uint64_t ParquetTextReader::rows_read() const { return arrow_->rows_read; }
uint64_t ParquetTextReader::nulls() const { return arrow_->nulls; }
uint64_t ParquetTextReader::text_bytes() const { return arrow_->text_bytes; }

}  // namespace mygpt
