#pragma once
// JsonFields: reads the fields of one object of a JSON document (a cluster file, a table of measured
// runs), naming "<document> <file>: field a.b.c" in every error, so a broken file is refused in one
// line that says which file, which field and what was expected.  read_document and
// parse_json_object are the two steps before it that every such file shares.
#include <cmath>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace mdtp::cost {

class JsonFields {
 public:
  using json = nlohmann::json;
  // `document` names the kind of file ("cluster file", "measured table"), `where` the file.
  JsonFields(const json& node, std::string document, std::string where, std::string prefix = "")
      : node_(node), document_(std::move(document)), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const json& field(const std::string& key) const {
    require(node_.contains(key), head(), "field '", prefix_ + key, "' is missing");
    return node_.at(key);
  }
  bool has(const std::string& key) const { return node_.contains(key); }
  std::string name(const std::string& key) const { return prefix_ + key; }

  std::string text(const std::string& key) const {
    const json& v = field(key);
    require(v.is_string(), head(), "field '", name(key), "' must be a string; got ", v.dump());
    return v.get<std::string>();
  }
  bool flag(const std::string& key) const {
    const json& v = field(key);
    require(v.is_boolean(), head(), "field '", name(key), "' must be true or false; got ", v.dump());
    return v.get<bool>();
  }
  // A number in (lo, hi]: the bounds every figure must respect.
  double number(const std::string& key, double lo, double hi) const { return number_of(field(key), name(key), lo, hi); }
  double number_of(const json& v, const std::string& full, double lo, double hi) const {
    require(v.is_number(), head(), "field '", full, "' must be a number; got ", v.dump());
    const double x = v.get<double>();
    require(std::isfinite(x) && x > lo && x <= hi, head(), "field '", full, "' must be in (", lo, ", ", hi, "]; got ",
            v.dump());
    return x;
  }
  // A number in [0, hi]: a cost or a probability that may be zero; `range` is how the message prints
  // the bounds and unit ("[0, 1e-3] s", "[0, 1)").
  double non_negative(const std::string& key, double hi, const std::string& range) const {
    const json& v = field(key);
    require(v.is_number(), head(), "field '", name(key), "' must be a number; got ", v.dump());
    const double x = v.get<double>();
    require(std::isfinite(x) && x >= 0 && x <= hi, head(), "field '", name(key), "' must be in ", range, "; got ",
            v.dump());
    return x;
  }
  long long integer(const std::string& key, long long lo, long long hi) const {
    return integer_of(field(key), name(key), lo, hi);
  }
  long long integer_of(const json& v, const std::string& full, long long lo, long long hi) const {
    require(v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi, head(), "field '", full,
            "' must be a whole number in [", lo, ", ", hi, "]; got ", v.dump());
    return v.get<long long>();
  }
  JsonFields object(const std::string& key) const {
    const json& v = field(key);
    require(v.is_object(), head(), "field '", name(key), "' must be an object; got ", v.dump());
    return JsonFields(v, document_, where_, name(key) + ".");
  }
  const json& node() const { return node_; }
  const std::string& where() const { return where_; }
  // "cluster file F: " — the start of every message about this document.
  std::string head() const { return document_ + " " + where_ + ": "; }

 private:
  const json& node_;
  std::string document_, where_, prefix_;
};

// A document file's whole text; mdtp::Error "<document> <path>: cannot be opened".
std::string read_document(const std::string& path, const std::string& document);
// The text parsed as a JSON object; mdtp::Error "<document> <where>: not valid JSON (…)" or
// "…: the top level must be an object".
JsonFields::json parse_json_object(const std::string& text, const std::string& document, const std::string& where);

}  // namespace mdtp::cost
