// Data types -> element layout: Zarr v3's core types, fixed-width strings, and record types
// (zarr-python 3's "structured", Zarr v2's numpy descr lists).
#include "zarr/dtype.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <set>

namespace lsio {

static_assert(std::endian::native == std::endian::little,
              "lsio assumes a little-endian host (x86-64, aarch64)");

namespace {

// Bounds on untrusted record types: nesting depth, one element's size (16 MiB: far beyond any
// real record, and the zero element below is built at open), numpy's datetime multiplier.
constexpr int kMaxDepth = 16;
constexpr size_t kMaxItemsize = size_t{1} << 24;
constexpr uint64_t kMaxDatetimeMultiplier = 2147483647;

// One field's type while a record type is built: its descr entry's format (a typestr, or
// the nested descr list), its size and numpy's cast of 0 to it.
struct FieldType {
  nlohmann::json format;
  size_t itemsize = 0;
  std::vector<uint8_t> zero;
};

Result<DataTypeInfo> ParseAt(const nlohmann::json& j, int depth);

// n >= 1 written in decimal digits only, at most `max`; false otherwise.
bool PositiveDecimal(const std::string& s, uint64_t max, uint64_t* n) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *n = std::stoull(s);
  return *n >= 1 && *n <= max;
}

// "[10s]", "[ns]", "" (generic): a datetime64/timedelta64 unit as numpy spells it.
bool DatetimeUnit(const std::string& s) {
  if (s.empty()) return true;
  if (s.size() < 3 || s.front() != '[' || s.back() != ']') return false;
  const std::string in = s.substr(1, s.size() - 2);
  const size_t digits = in.find_first_not_of("0123456789");
  if (digits == std::string::npos) return false;
  uint64_t mult = 1;
  if (digits > 0 && !PositiveDecimal(in.substr(0, digits), kMaxDatetimeMultiplier, &mult)) return false;
  static const std::set<std::string> kUnits = {"Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"};
  return kUnits.count(in.substr(digits)) > 0;
}

// numpy's cast of 0 to a string field: "0" (as np.array([0], dtype) makes it).
std::vector<uint8_t> StringZero(size_t itemsize, size_t unit, bool big) {
  std::vector<uint8_t> z(itemsize, 0);
  if (itemsize >= unit) z[big ? unit - 1 : 0] = '0';
  return z;
}

// A numpy leaf typestr of a record field, e.g. "<i4", "|S3", ">U2", "<M8[ns]" (Zarr v2's descr,
// HDF5 compounds); `where` names the metadata in errors.
Result<FieldType> NumpyLeaf(const std::string& s, const std::string& where = ".zarray") {
  auto bad = [&](const std::string& why) {
    return Status::InvalidFormat(where + ": structured dtype field type '" + s + "' " + why);
  };
  if (s.size() >= 2 && s[1] == 'O') {
    return Status::Unimplemented("structured dtype field type '" + s + "' (objects) is not supported by lsio");
  }
  if (s.size() < 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|')) return bad("is not a numpy type string");
  const char order = s[0];
  const char kind = s[1];
  const std::string rest = s.substr(2);
  FieldType f;
  uint64_t n = 0;
  if (kind == 'S' || kind == 'V' || kind == 'U') {
    if (!PositiveDecimal(rest, kind == 'U' ? kMaxItemsize / 4 : kMaxItemsize, &n)) return bad("needs a positive length of at most 16 MiB");
    if (kind == 'U') {
      if (order == '|') return bad("needs a byte order ('<' or '>')");
      f.format = s;
      f.itemsize = 4 * n;
      f.zero = StringZero(f.itemsize, 4, order == '>');
      return f;
    }
    f.format = std::string("|") + kind + rest;  // byte order means nothing to bytes
    f.itemsize = n;
    // numpy cannot cast 0 to raw bytes (zarr-python 3 then fails); zeros here.
    f.zero = kind == 'S' ? StringZero(n, 1, false) : std::vector<uint8_t>(n, 0);
    return f;
  }
  if (kind == 'M' || kind == 'm') {
    if (rest.empty() || rest[0] != '8' || !DatetimeUnit(rest.substr(1))) return bad("is not a datetime64/timedelta64 type");
    if (order == '|') return bad("needs a byte order ('<' or '>')");
    f.format = s;
    f.itemsize = 8;
    f.zero.assign(8, 0);
    return f;
  }
  static const std::set<std::string> kNumeric = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4",
                                                 "u8", "f2", "f4", "f8", "c8", "c16"};
  if (!kNumeric.count(std::string(1, kind) + rest)) {
    return Status::Unimplemented("structured dtype field type '" + s + "' is not supported by lsio yet");
  }
  f.itemsize = std::stoul(rest);
  if (f.itemsize == 1) {
    f.format = std::string("|") + kind + rest;
  } else {
    if (order == '|') return bad("needs a byte order ('<' or '>')");
    f.format = s;
  }
  f.zero.assign(f.itemsize, 0);
  return f;
}

// `count` copies of `unit` appended to `out`: by doubling (a subarray of 2^24 elements must
// not take 2^24 inserts), or as zeros when `unit` is all zeros.
void AppendRepeated(std::vector<uint8_t>& out, const std::vector<uint8_t>& unit, uint64_t count) {
  const size_t at = out.size();
  const size_t size = unit.size() * count;
  out.resize(at + size, 0);
  if (size == 0 || std::all_of(unit.begin(), unit.end(), [](uint8_t b) { return b == 0; })) return;
  std::copy(unit.begin(), unit.end(), out.begin() + static_cast<ptrdiff_t>(at));
  for (size_t done = unit.size(); done < size;) {
    const size_t n = std::min(done, size - done);
    std::copy_n(out.begin() + static_cast<ptrdiff_t>(at), n, out.begin() + static_cast<ptrdiff_t>(at + done));
    done += n;
  }
}

// A subarray shape: at most 32 sizes in [0, 2^30]; false otherwise.
bool SubarrayShape(const nlohmann::json& s) {
  bool ok = s.is_array() && s.size() <= 32;
  for (const auto& d : s) ok = ok && d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() <= int64_t{1} << 30;
  return ok;
}

// The element count of a valid subarray shape, or kMaxItemsize + 1 when it is larger.
uint64_t SubarrayCount(const nlohmann::json& shape) {
  uint64_t count = 1;
  bool huge = false;
  for (const auto& d : shape) {
    const uint64_t n = d.get<uint64_t>();
    if (n == 0) return 0;
    if (count > kMaxItemsize / n) huge = true;
    else count *= n;
  }
  return huge ? kMaxItemsize + 1 : count;
}

// A record type from its fields, each parsed by `field(entry, &name, &type)`. Names: an empty
// one is numpy's "f<index>"; names must differ.
template <typename FieldFn>
Result<DataTypeInfo> Record(const nlohmann::json& fields, const std::string& where, FieldFn field) {
  if (!fields.is_array() || fields.empty()) {
    return Status::InvalidFormat(where + ": a structured data type needs a non-empty list of fields, got " +
                                 fields.dump());
  }
  DataTypeInfo info;
  info.type = DataType::kStructured;
  info.name = "structured";
  nlohmann::json descr = nlohmann::json::array();
  std::set<std::string> names;
  size_t itemsize = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name;
    FieldType t;
    nlohmann::json shape;  // null: a scalar field
    LSIO_RETURN_IF_ERROR(field(fields[i], &name, &t, &shape));
    if (name.empty()) name = "f" + std::to_string(i);
    if (!names.insert(name).second) {
      return Status::InvalidFormat(where + ": structured data type field '" + name + "' occurs more than once");
    }
    const uint64_t count = shape.is_null() ? 1 : SubarrayCount(shape);  // shape checked by `field`
    if (t.itemsize > 0 && count > kMaxItemsize / t.itemsize) {
      return Status::InvalidFormat(where + ": structured data type field '" + name + "' is larger than 16 MiB");
    }
    const size_t size = t.itemsize * count;
    if (itemsize + size > kMaxItemsize) {
      return Status::InvalidFormat(where + ": a structured data type element is larger than 16 MiB");
    }
    itemsize += size;
    AppendRepeated(info.zero, t.zero, count);
    nlohmann::json entry = nlohmann::json::array({name, std::move(t.format)});
    if (!shape.is_null() && !shape.empty()) entry.push_back(shape);
    descr.push_back(std::move(entry));
  }
  if (itemsize == 0) return Status::InvalidFormat(where + ": a structured data type element has no bytes");
  info.itemsize = itemsize;
  info.swap_unit = 1;
  info.typestr = "|V" + std::to_string(itemsize);
  info.descr = descr.dump();
  return info;
}

// zarr-python 3's types lsio reads only as record fields, where they are copied as stored:
// numpy.datetime64 / numpy.timedelta64 ({"unit", "scale_factor"}) and raw_bytes
// ({"length_bytes"}). nullopt: not one of them.
std::optional<Result<FieldType>> V3RecordOnlyLeaf(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"].get<std::string>();
  if (name != "numpy.datetime64" && name != "numpy.timedelta64" && name != "raw_bytes") return std::nullopt;
  auto c = j.find("configuration");
  auto bad = [&](const std::string& why) -> Result<FieldType> {
    return Status::InvalidFormat("data type 'structured': field type " + j.dump() + " " + why);
  };
  if (c == j.end() || !c->is_object()) return bad("needs a \"configuration\"");
  FieldType f;
  if (name == "raw_bytes") {
    auto lb = c->find("length_bytes");
    if (lb == c->end() || !lb->is_number_integer() || lb->get<int64_t>() < 1 ||
        lb->get<int64_t>() > static_cast<int64_t>(kMaxItemsize)) {
      return bad("needs a positive integer \"length_bytes\"");
    }
    f.itemsize = static_cast<size_t>(lb->get<int64_t>());
    f.format = "|V" + std::to_string(f.itemsize);
    f.zero.assign(f.itemsize, 0);
    return f;
  }
  auto unit = c->find("unit");
  auto scale = c->find("scale_factor");
  if (unit == c->end() || !unit->is_string() || scale == c->end() || !scale->is_number_integer() ||
      scale->get<int64_t>() < 1 || scale->get<int64_t>() > static_cast<int64_t>(kMaxDatetimeMultiplier)) {
    return bad("needs a \"unit\" and a positive integer \"scale_factor\"");
  }
  const int64_t k = scale->get<int64_t>();
  const std::string spelled = "[" + (k == 1 ? std::string() : std::to_string(k)) + unit->get<std::string>() + "]";
  if (unit->get<std::string>() == "generic" && k == 1) {
    f.format = std::string(name == "numpy.datetime64" ? "<M8" : "<m8");
  } else if (DatetimeUnit(spelled)) {
    f.format = std::string(name == "numpy.datetime64" ? "<M8" : "<m8") + spelled;
  } else {
    return bad("has a unit numpy does not know");
  }
  f.itemsize = 8;
  f.zero.assign(8, 0);
  return f;
}

Result<DataTypeInfo> V2Record(const nlohmann::json& fields, int depth) {
  if (depth > kMaxDepth) return Status::InvalidFormat(".zarray: structured dtype nested deeper than 16 levels");
  return Record(fields, ".zarray", [&](const nlohmann::json& e, std::string* name, FieldType* t,
                                      nlohmann::json* shape) -> Status {
    if (!e.is_array() || e.size() < 2 || e.size() > 3) {
      return Status::InvalidFormat(".zarray: a structured dtype field must be [name, type] or [name, type, shape], got " +
                                   e.dump());
    }
    if (e[0].is_array()) return Status::Unimplemented("structured dtype fields with titles (" + e[0].dump() + ") are not supported by lsio");
    if (!e[0].is_string()) return Status::InvalidFormat(".zarray: a structured dtype field name must be a string, got " + e[0].dump());
    *name = e[0].get<std::string>();
    if (e[1].is_string()) {
      LSIO_ASSIGN_OR_RETURN(*t, NumpyLeaf(e[1].get<std::string>()));
    } else {
      LSIO_ASSIGN_OR_RETURN(DataTypeInfo sub, V2Record(e[1], depth + 1));
      t->format = nlohmann::json::parse(sub.descr);
      t->itemsize = sub.itemsize;
      t->zero = std::move(sub.zero);
    }
    if (e.size() == 3) {
      nlohmann::json s = e[2].is_number_integer() ? nlohmann::json::array({e[2]}) : e[2];
      if (!SubarrayShape(s)) return Status::InvalidFormat(".zarray: structured dtype field '" + *name + "' has shape " + e[2].dump() +
                                            ", not a list of sizes");
      *shape = std::move(s);
    }
    return Status::Ok();
  });
}

// An HDF5 compound type as python/lsio/_hdf5.py writes h5py's numpy dtype of it: numpy's dict
// form {"names", "formats", "offsets", "itemsize"}, each format a leaf typestr, a nested
// compound, or {"subarray": format, "shape": [...]}. Fields sit at their offsets, the gaps
// are padding; fields must not overlap. HDF5 datasets always have a fill value, so no zero
// element is built (`zero` stays empty: a crafted type must not make open build megabytes).
Result<FieldType> CompoundFormat(const nlohmann::json& f, int depth);

Result<FieldType> Compound(const nlohmann::json& c, int depth) {
  const std::string where = "data type 'lsio.hdf5.compound'";
  if (depth > kMaxDepth) return Status::InvalidFormat(where + " nested deeper than 16 levels");
  auto list = [&](const char* key) { return c.is_object() && c.contains(key) && c[key].is_array(); };
  if (!list("names") || !list("formats") || !list("offsets") || !c.contains("itemsize") ||
      !c["itemsize"].is_number_integer() || c["names"].empty() || c["formats"].size() != c["names"].size() ||
      c["offsets"].size() != c["names"].size()) {
    return Status::InvalidFormat(where + " needs \"names\", \"formats\" and \"offsets\" of one length and an "
                                 "integer \"itemsize\", got " + c.dump());
  }
  const int64_t itemsize = c["itemsize"].get<int64_t>();
  if (itemsize < 1 || itemsize > static_cast<int64_t>(kMaxItemsize)) {
    return Status::InvalidFormat(where + ": itemsize must be 1 to 16 MiB, got " + std::to_string(itemsize));
  }
  FieldType out;
  out.itemsize = static_cast<size_t>(itemsize);
  std::set<std::string> names;
  std::vector<std::pair<size_t, size_t>> spans;  // [offset, end) of each field
  nlohmann::json formats = nlohmann::json::array();
  for (size_t i = 0; i < c["names"].size(); ++i) {
    const nlohmann::json& n = c["names"][i];
    const nlohmann::json& o = c["offsets"][i];
    if (!n.is_string() || n.get<std::string>().empty() || !names.insert(n.get<std::string>()).second) {
      return Status::InvalidFormat(where + ": field names must be distinct non-empty strings, got " + n.dump());
    }
    LSIO_ASSIGN_OR_RETURN(FieldType t, CompoundFormat(c["formats"][i], depth));
    if (!o.is_number_integer() || o.get<int64_t>() < 0 ||
        static_cast<uint64_t>(o.get<int64_t>()) + t.itemsize > out.itemsize) {
      return Status::InvalidFormat(where + ": field '" + n.get<std::string>() + "' at offset " + o.dump() +
                                   " does not fit in " + std::to_string(out.itemsize) + " bytes");
    }
    const size_t at = static_cast<size_t>(o.get<int64_t>());
    spans.emplace_back(at, at + t.itemsize);
    formats.push_back(std::move(t.format));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) return Status::InvalidFormat(where + ": fields overlap");
  }
  out.format = {{"names", c["names"]}, {"formats", std::move(formats)}, {"offsets", c["offsets"]},
                {"itemsize", itemsize}};
  return out;
}

Result<FieldType> CompoundFormat(const nlohmann::json& f, int depth) {
  if (f.is_string()) return NumpyLeaf(f.get<std::string>(), "data type 'lsio.hdf5.compound'");
  if (f.is_object() && f.contains("names")) return Compound(f, depth + 1);
  if (f.is_object() && f.contains("subarray") && f.contains("shape") && SubarrayShape(f["shape"])) {
    LSIO_ASSIGN_OR_RETURN(FieldType base, CompoundFormat(f["subarray"], depth + 1));
    const uint64_t count = SubarrayCount(f["shape"]);
    if (base.itemsize == 0 || count > kMaxItemsize / base.itemsize) {  // numpy refuses empty bases
      return Status::InvalidFormat("data type 'lsio.hdf5.compound': a subarray field of empty elements or "
                                   "larger than 16 MiB");
    }
    FieldType t;
    t.itemsize = base.itemsize * count;
    t.format = {{"subarray", std::move(base.format)}, {"shape", f["shape"]}};
    return t;
  }
  return Status::InvalidFormat("data type 'lsio.hdf5.compound': a field format must be a type string, a compound or "
                               "{\"subarray\", \"shape\"}, got " + f.dump());
}

}  // namespace

Result<DataTypeInfo> ParseV2StructuredType(const nlohmann::json& fields) { return V2Record(fields, 1); }

Result<DataTypeInfo> ParseDataType(const nlohmann::json& j) { return ParseAt(j, 1); }

namespace {

Result<DataTypeInfo> ParseAt(const nlohmann::json& j, int depth) {
  if (j.is_object()) {
    auto n = j.find("name");
    const std::string name = (n != j.end() && n->is_string()) ? n->get<std::string>() : "?";
    if (name == "lsio.v2.structured" && depth == 1) {  // a .zarray's descr list (metadata_v2.cc)
      auto c = j.find("configuration");
      if (c == j.end() || !c->is_object() || !c->contains("fields")) {
        return Status::InvalidFormat("data type 'lsio.v2.structured' needs a \"configuration\" with \"fields\"");
      }
      return V2Record((*c)["fields"], depth);
    }
    if (name == "lsio.hdf5.compound" && depth == 1) {  // an HDF5 compound (python/lsio/_hdf5.py)
      auto c = j.find("configuration");
      if (c == j.end()) return Status::InvalidFormat("data type 'lsio.hdf5.compound' needs a \"configuration\"");
      LSIO_ASSIGN_OR_RETURN(FieldType t, Compound(*c, 1));
      DataTypeInfo info;
      info.type = DataType::kStructured;
      info.name = "structured";
      info.itemsize = t.itemsize;
      info.swap_unit = 1;
      info.typestr = "|V" + std::to_string(t.itemsize);
      info.descr = t.format.dump();
      info.zero = std::move(t.zero);
      return info;
    }
    if (name == "structured") {
      // zarr-python 3's record type (no spec yet): fields in their v3 types, little-endian.
      if (depth > kMaxDepth) return Status::InvalidFormat("data type 'structured' nested deeper than 16 levels");
      auto c = j.find("configuration");
      auto f = c != j.end() && c->is_object() ? c->find("fields") : j.end();
      if (c == j.end() || !c->is_object() || f == c->end()) {
        return Status::InvalidFormat("data type 'structured' needs a \"configuration\" with \"fields\"");
      }
      return Record(*f, "data type 'structured'", [&](const nlohmann::json& e, std::string* fname, FieldType* t,
                                                     nlohmann::json*) -> Status {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string()) {
          return Status::InvalidFormat("data type 'structured': a field must be [name, data_type], got " + e.dump());
        }
        *fname = e[0].get<std::string>();
        if (auto leaf = V3RecordOnlyLeaf(e[1]); leaf.has_value()) {
          LSIO_ASSIGN_OR_RETURN(*t, std::move(*leaf));
          return Status::Ok();
        }
        LSIO_ASSIGN_OR_RETURN(DataTypeInfo sub, ParseAt(e[1], depth + 1));
        t->itemsize = sub.itemsize;
        if (sub.type == DataType::kStructured) {
          t->format = nlohmann::json::parse(sub.descr);
          t->zero = std::move(sub.zero);
        } else {
          t->format = sub.typestr;
          t->zero = sub.type == DataType::kFixedUtf32   ? StringZero(sub.itemsize, 4, false)
                    : sub.type == DataType::kFixedBytes ? StringZero(sub.itemsize, 1, false)
                                                        : std::vector<uint8_t>(sub.itemsize, 0);
        }
        return Status::Ok();
      });
    }
    if (name == "fixed_length_utf32" || name == "null_terminated_bytes") {
      auto c = j.find("configuration");
      auto lb = c != j.end() && c->is_object() ? c->find("length_bytes") : j.end();
      const bool utf32 = name == "fixed_length_utf32";
      if (c == j.end() || !c->is_object() || lb == c->end() || !lb->is_number_integer() || lb->get<int64_t>() < 1 ||
          lb->get<int64_t>() > (1 << 30) || (utf32 && lb->get<int64_t>() % 4 != 0)) {
        return Status::InvalidFormat("data type '" + name + "' needs a positive integer \"length_bytes\"" +
                                     (utf32 ? std::string(" that is a multiple of 4") : std::string()));
      }
      const size_t bytes = static_cast<size_t>(lb->get<int64_t>());
      if (utf32) {
        return DataTypeInfo{DataType::kFixedUtf32, name, "<U" + std::to_string(bytes / 4), bytes, 4, {}, {}};
      }
      return DataTypeInfo{DataType::kFixedBytes, name, "|S" + std::to_string(bytes), bytes, 1, {}, {}};
    }
    return Status::Unimplemented("data type '" + name + "' (extension data types) is not supported by lsio yet");
  }
  if (!j.is_string()) return Status::InvalidFormat("\"data_type\" must be a string");
  const std::string s = j.get<std::string>();
  struct Row { const char* name; DataType t; const char* typestr; size_t itemsize; size_t swap; };
  static const Row kRows[] = {
      {"bool", DataType::kBool, "|b1", 1, 1},
      {"int8", DataType::kInt8, "|i1", 1, 1},
      {"int16", DataType::kInt16, "<i2", 2, 2},
      {"int32", DataType::kInt32, "<i4", 4, 4},
      {"int64", DataType::kInt64, "<i8", 8, 8},
      {"uint8", DataType::kUInt8, "|u1", 1, 1},
      {"uint16", DataType::kUInt16, "<u2", 2, 2},
      {"uint32", DataType::kUInt32, "<u4", 4, 4},
      {"uint64", DataType::kUInt64, "<u8", 8, 8},
      {"float16", DataType::kFloat16, "<f2", 2, 2},
      {"float32", DataType::kFloat32, "<f4", 4, 4},
      {"float64", DataType::kFloat64, "<f8", 8, 8},
      {"complex64", DataType::kComplex64, "<c8", 8, 4},
      {"complex128", DataType::kComplex128, "<c16", 16, 8},
  };
  for (const Row& r : kRows) {
    if (s == r.name) return DataTypeInfo{r.t, r.name, r.typestr, r.itemsize, r.swap, {}, {}};
  }
  return Status::Unimplemented("data type '" + s + "' is not supported by lsio yet");
}

}  // namespace

}  // namespace lsio
