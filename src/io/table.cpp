#include "io/table.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp {

Table& Table::text(const std::string& name) {
  require(rows() == 0, "table column '", name, "' declared after rows were added");
  names_.push_back(name);
  columns_.emplace_back(std::vector<std::string>{});
  return *this;
}
Table& Table::integer(const std::string& name) {
  require(rows() == 0, "table column '", name, "' declared after rows were added");
  names_.push_back(name);
  columns_.emplace_back(std::vector<std::int64_t>{});
  return *this;
}
Table& Table::real(const std::string& name) {
  require(rows() == 0, "table column '", name, "' declared after rows were added");
  names_.push_back(name);
  columns_.emplace_back(std::vector<double>{});
  return *this;
}

std::size_t Table::rows() const {
  if (columns_.empty()) return 0;
  return std::visit([](const auto& v) { return v.size(); }, columns_.back());
}

const Table::Column& Table::column(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  require(it != names_.end(), "table has no column '", name, "'");
  return columns_[static_cast<std::size_t>(it - names_.begin())];
}

namespace {
template <class T>
void push(std::vector<std::string>& names, std::vector<Table::Column>& columns, std::size_t index, T value,
          const char* type) {
  require(index < columns.size(), "table row has more values than the ", columns.size(), " columns");
  auto* column = std::get_if<std::vector<T>>(&columns[index]);
  require(column != nullptr, "table column '", names[index], "' does not hold ", type, " values");
  column->push_back(std::move(value));
}
}  // namespace

Table::RowBuilder& Table::RowBuilder::operator()(const std::string& value) {
  push(table_.names_, table_.columns_, next_++, value, "text");
  return *this;
}
Table::RowBuilder& Table::RowBuilder::operator()(std::int64_t value) {
  push(table_.names_, table_.columns_, next_++, value, "integer");
  return *this;
}
Table::RowBuilder& Table::RowBuilder::operator()(double value) {
  push(table_.names_, table_.columns_, next_++, value, "real");
  return *this;
}
Table::RowBuilder::~RowBuilder() noexcept(false) {
  if (next_ != table_.columns_.size() && std::uncaught_exceptions() == 0)
    throw_error("table row has ", next_, " values for ", table_.columns_.size(), " columns");
}

}  // namespace mdtp
