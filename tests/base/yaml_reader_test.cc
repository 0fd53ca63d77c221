#include "base/yaml_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

YAML::Node Parse(const std::string& text) {
  auto r = ParseYaml(text, "t.yaml");
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : YAML::Node();
}

// One field, one bad value: the message names file, line, field path and the problem.
struct BadValue {
  const char* value;
  const char* kind;  // int, double, bool, string
  const char* expect;
};

TEST(YamlReader, BadValuesNameFileLineAndField) {
  const BadValue cases[] = {
      {"three", "int", "expected an integer in [1, 64], got \"three\""},
      {"1e30", "int", "expected an integer in [1, 64], got \"1e30\""},
      {"9223372036854775808", "int", "got \"9223372036854775808\""},
      {"-9223372036854775809", "int", "got \"-9223372036854775809\""},
      {"0x7fffffff", "int", "expected an integer in [1, 64]"},
      {"65", "int", "in [1, 64], got \"65\""},
      {"2.5", "int", "got \"2.5\""},
      {"[1, 2]", "int", "got a list"},
      {"{a: 1}", "int", "got a map"},
      {"~", "int", "got null"},
      {"''", "int", "got \"\""},
      {".nan", "double", "expected a number in [0, 100], got \".nan\""},
      {".inf", "double", "got \".inf\""},
      {"-.inf", "double", "got \"-.inf\""},
      {"1e30", "double", "got \"1e30\""},
      {"1e400", "double", "got \"1e400\""},
      {"nan", "double", "got \"nan\""},
      {"0x10", "double", "got \"0x10\""},
      {"ten", "double", "got \"ten\""},
      {"[x, [y]]", "double", "got a list"},
      {"maybe", "bool", "expected true or false, got \"maybe\""},
      {"{k: v}", "bool", "got a map"},
      {"[a]", "string", "expected text, got a list"},
      {"~", "string", "expected text, got null"},
  };
  for (const BadValue& c : cases) {
    const std::string text = std::string("top:\n  nodes:\n    - {}\n    - field: ") + c.value + "\n";
    YAML::Node root = Parse(text);
    FieldReader r(root["top"]["nodes"][1], "t.yaml", "top.nodes[1]");
    int64_t i = 7;
    double d = 7;
    bool b = false;
    std::string s = "x";
    const std::string kind = c.kind;
    if (kind == "int") r.Int("field", &i, true, 1, 64);
    if (kind == "double") r.Double("field", &d, true, 0, 100);
    if (kind == "bool") r.Bool("field", &b, true);
    if (kind == "string") r.String("field", &s, true);
    Status st = r.Finish();
    ASSERT_FALSE(st.ok()) << c.value;
    EXPECT_EQ(st.message().rfind("t.yaml:4: top.nodes[1].field: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.value << " -> " << st.message();
    EXPECT_EQ(i, 7);  // untouched on error
    EXPECT_EQ(d, 7);
    EXPECT_EQ(s, "x");
  }
}

TEST(YamlReader, GoodValuesAreRead) {
  YAML::Node root = Parse("a: 12\nb: -0x10\nc: 2.5e3\nd: yes\ne: hello\nf: [1, 2]\ng: [a, b]\nh: +3\n");
  FieldReader r(root, "t.yaml", "");
  int64_t a = 0, b = 0;
  int h = 0;
  double c = 0, lo = 0, hi = 0;
  bool d = false;
  std::string e;
  std::vector<std::string> g;
  r.Int("a", &a, true, 0, 100);
  r.Int("b", &b, true, -100, 100);
  r.Double("c", &c, true, 0, 1e4);
  r.Bool("d", &d);
  r.String("e", &e, true);
  r.Range("f", &lo, &hi, true, 0, 10);
  r.StringList("g", &g, true, 1);
  r.Int("h", &h, true, 0, 5);
  ASSERT_TRUE(r.Finish().ok()) << r.status().message();
  EXPECT_EQ(a, 12);
  EXPECT_EQ(b, -16);
  EXPECT_EQ(c, 2500);
  EXPECT_TRUE(d);
  EXPECT_EQ(e, "hello");
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 2);
  EXPECT_EQ(g, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(h, 3);
}

TEST(YamlReader, MissingRequiredAndUnknownKeys) {
  YAML::Node root = Parse("name: x\ngpus_typo: 1\n");
  {
    FieldReader r(root, "t.yaml", "nodes[0]");
    std::string name;
    int64_t gpus = 0;
    r.String("name", &name, true);
    r.Int("gpus", &gpus, true, 0, 8);
    EXPECT_EQ(r.Finish().message(), "t.yaml:1: nodes[0].gpus: required");
  }
  {
    FieldReader r(root, "t.yaml", "nodes[0]");
    std::string name;
    int64_t gpus = 0;
    r.String("name", &name, true);
    r.Int("gpus", &gpus, false, 0, 8);
    const std::string m = r.Finish().message();
    EXPECT_EQ(m.rfind("t.yaml:2: nodes[0].gpus_typo: unknown field (known: ", 0), 0u) << m;
    EXPECT_NE(m.find("gpus, name"), std::string::npos) << m;
  }
}

TEST(YamlReader, WrongShapes) {
  YAML::Node root = Parse("a: 1\nb: [1]\nc: {x: 1}\nr: [3, 1]\ns: [1, 2, 3]\n");
  {
    FieldReader r(root, "t.yaml", "");
    r.Map("a");
    EXPECT_EQ(r.status().message(), "t.yaml:1: a: expected a map, got \"1\"");
  }
  {
    FieldReader r(root, "t.yaml", "");
    r.Seq("c");
    EXPECT_EQ(r.status().message(), "t.yaml:3: c: expected a list, got a map");
  }
  {
    FieldReader r(root, "t.yaml", "");
    double lo = 0, hi = 0;
    r.Range("r", &lo, &hi, true, 0, 10);
    EXPECT_EQ(r.status().message(), "t.yaml:4: r: high 1 is below low 3");
  }
  {
    FieldReader r(root, "t.yaml", "");
    double lo = 0, hi = 0;
    r.Range("s", &lo, &hi, true, 0, 10);
    EXPECT_NE(r.status().message().find("t.yaml:5: s: expected [low, high]"), std::string::npos);
  }
  {
    FieldReader r(root["b"], "t.yaml", "top");
    EXPECT_EQ(r.status().message(), "t.yaml:2: top: expected a map, got a list");
  }
  {
    FieldReader r(root, "t.yaml", "");
    std::string v;
    r.Choice("a", &v, true, {"x", "y"});
    EXPECT_EQ(r.status().message(), "t.yaml:1: a: expected one of x, y, got \"1\"");
  }
}

TEST(YamlReader, AbsentSectionsAreFineWhenAllowed) {
  YAML::Node root = Parse("a:\n");
  FieldReader absent(root["b"], "t.yaml", "b", /*absent_ok=*/true);
  int64_t v = 3;
  absent.Int("x", &v, false, 0, 9);
  EXPECT_TRUE(absent.Finish().ok());
  EXPECT_EQ(v, 3);
  FieldReader null_section(root["a"], "t.yaml", "a", true);
  EXPECT_TRUE(null_section.Finish().ok());
  FieldReader required(root["b"], "t.yaml", "b");
  EXPECT_FALSE(required.ok());
}

TEST(YamlReader, ParseErrorsCarryFileAndLine) {
  const char* bad[] = {"a: [1, 2\n", "{", "a: b: c\n", "a: \"\\q\"\n", "\x01\x02\xff\xfe: [\n"};
  for (const char* text : bad) {
    auto r = ParseYaml(text, "bad.yaml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().rfind("bad.yaml:", 0), 0u) << r.error();
    EXPECT_NE(r.error().find("YAML syntax error"), std::string::npos) << r.error();
  }
  std::string deep(5000, '[');
  auto r = ParseYaml(deep, "deep.yaml");
  EXPECT_FALSE(r.ok());
}

TEST(YamlReader, SelfReferenceIsNotAMap) {
  YAML::Node root = Parse("a: &x [*x]\n");
  FieldReader r(root, "t.yaml", "");
  int64_t v = 0;
  r.Int("a", &v, true, 0, 9);
  EXPECT_NE(r.status().message().find("t.yaml:1: a: expected an integer in [0, 9], got a list"), std::string::npos)
      << r.status().message();
}

TEST(YamlReader, SourcedDouble) {
  YAML::Node root = Parse("p: 3\nq: {value: 4, source: list}\nr: {value: 4, sauce: x}\n");
  FieldReader r(root, "t.yaml", "");
  SourcedNumber p, q;
  r.SourcedDouble("p", &p, true, 0, 10);
  r.SourcedDouble("q", &q, true, 0, 10);
  EXPECT_EQ(p.value, 3);
  EXPECT_EQ(q.value, 4);
  EXPECT_EQ(q.source, "list");
  SourcedNumber bad;
  r.SourcedDouble("r", &bad, true, 0, 10);
  EXPECT_EQ(r.status().message().rfind("t.yaml:3: r.sauce: unknown field", 0), 0u) << r.status().message();
}

}  // namespace
}  // namespace tessera
