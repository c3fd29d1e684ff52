#pragma once
// Table: named columns of equal length (text, integer or real), the unit every result is written
// as.  In HDF5 a table becomes one compound dataset, so `pandas.DataFrame(f[path][()])` reads it
// in one line.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace mdtp {

class Table {
 public:
  using Column = std::variant<std::vector<std::string>, std::vector<std::int64_t>, std::vector<double>>;

  // Declares a column (all columns before the first row).
  Table& text(const std::string& name);
  Table& integer(const std::string& name);
  Table& real(const std::string& name);

  // Appends one row; values in column order, each of the column's type.
  class RowBuilder {
   public:
    RowBuilder& operator()(const std::string& value);
    RowBuilder& operator()(const char* value) { return (*this)(std::string(value)); }
    RowBuilder& operator()(std::int64_t value);
    RowBuilder& operator()(int value) { return (*this)(static_cast<std::int64_t>(value)); }
    RowBuilder& operator()(double value);
    ~RowBuilder() noexcept(false);

   private:
    friend class Table;
    explicit RowBuilder(Table& table) : table_(table) {}
    Table& table_;
    std::size_t next_ = 0;
  };
  RowBuilder row() { return RowBuilder(*this); }

  std::size_t rows() const;
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<Column>& columns() const { return columns_; }
  // Column by name, for tests and printing.
  const Column& column(const std::string& name) const;

 private:
  std::vector<std::string> names_;
  std::vector<Column> columns_;
};

}  // namespace mdtp
