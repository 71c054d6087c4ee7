// The Python-compatible formatting helpers, each against what CPython prints
// (str.strip, bool(), repr(float), str(), json.dumps), worked out by hand.
#include "tokenizer/python_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "util/error.h"

using namespace deltafin;
using Json = nlohmann::ordered_json;

namespace {

TEST(PythonFormat, StripAndBlank) {
  EXPECT_EQ(python_strip("  a b \n"), "a b");
  EXPECT_EQ(python_strip("\t\n\v\f\r\x1c\x1d\x1e\x1f x"), "x");  // U+001C..U+001F count
  EXPECT_EQ(python_strip("\xc2\xa0x\xe3\x80\x80"), "x");          // U+00A0, U+3000
  EXPECT_EQ(python_strip("\xc2\x85x\xe2\x80\xa8"), "x");          // U+0085, U+2028
  EXPECT_EQ(python_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");      // U+200B is not a space
  EXPECT_EQ(python_strip(" \xff "), "\xff");                      // invalid byte: never stripped
  EXPECT_EQ(python_strip("\x85"), "\x85");                        // lone continuation byte
  EXPECT_EQ(python_strip(""), "");
  EXPECT_TRUE(python_is_blank(""));
  EXPECT_TRUE(python_is_blank(" \n\t\xe3\x80\x80"));
  EXPECT_FALSE(python_is_blank(" x "));
  EXPECT_FALSE(python_is_blank("\xff"));
}

TEST(PythonFormat, Truthiness) {
  for (const Json& v : {Json(""), Json(0), Json(0u), Json(0.0), Json(-0.0), Json::array(), Json::object(),
                        Json(nullptr), Json(false)}) {
    EXPECT_FALSE(python_truthy(v)) << v.dump();
  }
  for (const Json& v : {Json(" "), Json("0"), Json(1), Json(-1), Json(0.5), Json::array({0}),
                        Json::object({{"a", nullptr}}), Json(true),
                        Json(std::numeric_limits<double>::quiet_NaN())}) {
    EXPECT_TRUE(python_truthy(v)) << v.dump();
  }
}

TEST(PythonFormat, FloatRepr) {
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(3.0), "3.0");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(123.456), "123.456");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(2.5e-7), "2.5e-07");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(-1.25e17), "-1.25e+17");
  EXPECT_EQ(python_float_repr(12345678901234567.0), "1.2345678901234568e+16");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(5e-324), "5e-324");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(python_float_repr(INFINITY), "inf");
  EXPECT_EQ(python_float_repr(-INFINITY), "-inf");
}

TEST(PythonFormat, Str) {
  EXPECT_EQ(python_str(Json("a \"b\""), "f"), "a \"b\"");
  EXPECT_EQ(python_str(Json(true), "f"), "True");
  EXPECT_EQ(python_str(Json(false), "f"), "False");
  EXPECT_EQ(python_str(Json(nullptr), "f"), "None");
  EXPECT_EQ(python_str(Json(-7), "f"), "-7");
  EXPECT_EQ(python_str(Json(18446744073709551615u), "f"), "18446744073709551615");
  EXPECT_EQ(python_str(Json(2.0), "f"), "2.0");
  EXPECT_EQ(python_str(Json(1e16), "f"), "1e+16");
  try {
    python_str(Json::array({1}), "messages[0].name");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "messages[0].name: expected string, number, boolean or null, got array");
  }
}

TEST(PythonFormat, DumpsSeparatorsAndKeyOrder) {
  const Json v = Json::parse(R"({"b": 1, "a": [1, 2.5, null, true, false], "c": {"y": {}, "x": []}})");
  EXPECT_EQ(python_json_dumps(v, kJsonCompactSorted), R"({"a":[1,2.5,null,true,false],"b":1,"c":{"x":[],"y":{}}})");
  EXPECT_EQ(python_json_dumps(v, kJsonPythonDefault),
            R"({"b": 1, "a": [1, 2.5, null, true, false], "c": {"y": {}, "x": []}})");
  // sort_keys orders by code point: "Z" < "z" < "é".
  EXPECT_EQ(python_json_dumps(Json::parse(R"({"é": 1, "z": 2, "Z": 3})"), kJsonCompactSorted),
            R"({"Z":3,"z":2,"é":1})");
  EXPECT_EQ(python_json_dumps(Json::array(), kJsonPythonDefault), "[]");
  EXPECT_EQ(python_json_dumps(Json::object(), kJsonPythonDefault), "{}");
}

TEST(PythonFormat, DumpsScalars) {
  EXPECT_EQ(python_json_dumps(Json(1e16), kJsonPythonDefault), "1e+16");
  EXPECT_EQ(python_json_dumps(Json(1e15), kJsonPythonDefault), "1000000000000000.0");
  EXPECT_EQ(python_json_dumps(Json(-0.0), kJsonPythonDefault), "-0.0");
  EXPECT_EQ(python_json_dumps(Json(-3), kJsonPythonDefault), "-3");
  EXPECT_EQ(python_json_dumps(Json(std::numeric_limits<double>::quiet_NaN()), kJsonPythonDefault), "NaN");
  EXPECT_EQ(python_json_dumps(Json(INFINITY), kJsonPythonDefault), "Infinity");
  EXPECT_EQ(python_json_dumps(Json(-INFINITY), kJsonPythonDefault), "-Infinity");
}

TEST(PythonFormat, DumpsStringEscaping) {
  // Only '"', '\\' and C0 controls are escaped; '/' and DEL stay as they are.
  EXPECT_EQ(python_json_dumps(Json("q\"b\\s/\n\r\t\b\f\x01\x1f\x7f"), kJsonPythonDefault),
            "\"q\\\"b\\\\s/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"");
  // ensure_ascii=False: non-ASCII stays UTF-8, in keys too.
  EXPECT_EQ(python_json_dumps(Json::object({{"clé", "héllo ✓ 😀"}}), kJsonPythonDefault),
            "{\"clé\": \"héllo ✓ 😀\"}");
  // Invalid UTF-8 passes through instead of throwing as nlohmann's dump() would.
  EXPECT_EQ(python_json_dumps(Json("a\xff"), kJsonCompactSorted), "\"a\xff\"");
}

}  // namespace
