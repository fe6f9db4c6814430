// A build without Arrow's Parquet library: every Parquet input is refused in one line saying how to get it.
#include <stdexcept>

#include "dataloader/parquet_text_reader.h"

namespace mygpt {

bool parquet_support_built() { return false; }

struct ParquetTextReader::Arrow {};

ParquetTextReader::ParquetTextReader(const std::string& path, const std::string&) {
  throw std::invalid_argument("input file '" + path +
                              "' is Parquet, and this build reads no Parquet: install Arrow's C++ Parquet library "
                              "(scripts/setup.sh pip-installs pyarrow into .venv; or apt-get install libparquet-dev, "
                              "brew install apache-arrow) and configure again");
}
ParquetTextReader::~ParquetTextReader() = default;
bool ParquetTextReader::next(std::vector<std::string>&) { return false; }
uint64_t ParquetTextReader::rows() const { return 0; }
uint64_t ParquetTextReader::rows_read() const { return 0; }
uint64_t ParquetTextReader::nulls() const { return 0; }
uint64_t ParquetTextReader::text_bytes() const { return 0; }

}  // namespace mygpt
