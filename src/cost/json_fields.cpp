#include "cost/json_fields.hpp"

#include <fstream>
#include <sstream>

namespace mdtp::cost {

std::string read_document(const std::string& path, const std::string& document) {
  std::ifstream in(path);
  require(in.good(), document, " ", path, ": cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

JsonFields::json parse_json_object(const std::string& text, const std::string& document, const std::string& where) {
  JsonFields::json doc;
  try {
    doc = JsonFields::json::parse(text);
  } catch (const JsonFields::json::parse_error& e) {
    throw_error(document, " ", where, ": not valid JSON (", e.what(), ")");
  }
  require(doc.is_object(), document, " ", where, ": the top level must be an object");
  return doc;
}

}  // namespace mdtp::cost
