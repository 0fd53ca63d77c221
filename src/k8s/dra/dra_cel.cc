// A tokenizer, a recursive-descent parser into a small tree, and an evaluator over values that carry CEL's
// error channel. Unsupported constructs are found while parsing where possible (unknown tokens, functions,
// methods, identifiers) and otherwise while evaluating (a method on a value type it does not have).
#include "k8s/dra/dra_cel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "k8s/api/quantity.h"

namespace tessera {

struct CelValue;
using CelMap = std::map<std::string, CelValue>;

struct CelValue {
  enum class Type { kBool, kInt, kString, kQuantity, kVersion, kList, kMap };
  Type type = Type::kBool;
  bool b = false;
  int64_t i = 0;  // kInt, or thousandths for kQuantity
  std::string s;
  DraVersion v;
  std::vector<CelValue> list;
  std::shared_ptr<const CelMap> map;
};

struct CelNode {
  enum class Kind {
    kLiteral,
    kIdent,
    kList,
    kSelect,
    kIndex,
    kCall,
    kMethod,
    kNot,
    kNeg,
    kAnd,
    kOr,
    kCompare,
    kIn,
    kHas
  };
  Kind kind = Kind::kLiteral;
  CelValue literal;
  std::string name;  // identifier, field, function, method or comparison operator
  std::vector<std::shared_ptr<const CelNode>> kids;
};

namespace {

using NodePtr = std::shared_ptr<const CelNode>;
using Kind = CelNode::Kind;
using Type = CelValue::Type;

// ------------------------------------------------------------------------------------------- tokens

struct Token {
  enum class Kind { kInt, kString, kOp, kIdent, kEnd } kind;
  std::string text;
};

struct Unsupported {
  std::string why;
};

bool ReadString(const std::string& e, size_t* pos, std::string* out) {
  const char quote = e[*pos];
  for (size_t i = *pos + 1; i < e.size(); ++i) {
    if (e[i] == quote) {
      *pos = i + 1;
      return true;
    }
    if (e[i] == '\\' && i + 1 < e.size()) {
      const char c = e[++i];
      *out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      *out += e[i];
    }
  }
  return false;
}

std::vector<Token> Tokenize(const std::string& e, Unsupported* err) {
  static const char* kOps[] = {"==", "!=", "<=", ">=", "&&", "||", "<", ">",
                               "!",  "(",  ")",  "[",  "]",  ".",  ",", "-"};
  std::vector<Token> out;
  size_t pos = 0;
  while (pos < e.size()) {
    const char c = e[pos];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++pos;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos;
      while (end < e.size() && std::isdigit(static_cast<unsigned char>(e[end]))) ++end;
      if (end < e.size() && (e[end] == '.' || e[end] == 'e' || e[end] == 'u' || e[end] == 'x')) {
        err->why =
            fmt::format("number '{}...' (only decimal integers are supported)", e.substr(pos, end - pos + 1));
        return {};
      }
      out.push_back({Token::Kind::kInt, e.substr(pos, end - pos)});
      pos = end;
    } else if (c == '"' || c == '\'') {
      std::string s;
      if (!ReadString(e, &pos, &s)) {
        err->why = "unterminated string";
        return {};
      }
      out.push_back({Token::Kind::kString, s});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos;
      while (end < e.size() && (std::isalnum(static_cast<unsigned char>(e[end])) || e[end] == '_')) ++end;
      out.push_back({Token::Kind::kIdent, e.substr(pos, end - pos)});
      pos = end;
    } else {
      const char** op = std::find_if(std::begin(kOps), std::end(kOps),
                                     [&](const char* o) { return e.compare(pos, std::strlen(o), o) == 0; });
      if (op == std::end(kOps)) {
        err->why = fmt::format("operator '{}' at offset {}", e.substr(pos, 2), pos);
        return {};
      }
      out.push_back({Token::Kind::kOp, *op});
      pos += std::strlen(*op);
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

// ------------------------------------------------------------------------------------------- parser

const std::set<std::string> kMethods = {"compareTo", "isGreaterThan", "isLessThan", "startsWith", "endsWith",
                                        "contains",  "size",          "lowerAscii", "upperAscii"};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  NodePtr Parse() {
    NodePtr n = Or();
    if (!Failed() && Peek().kind != Token::Kind::kEnd) Fail(fmt::format("unexpected '{}'", Peek().text));
    return Failed() ? nullptr : n;
  }
  bool Failed() const { return !err_.empty(); }
  const std::string& error() const { return err_; }

 private:
  const Token& Peek() const { return t_[i_]; }
  bool IsOp(const char* op) const { return Peek().kind == Token::Kind::kOp && Peek().text == op; }
  void Fail(std::string why) {
    if (err_.empty()) err_ = std::move(why);
    i_ = t_.size() - 1;  // at kEnd: every loop stops
  }
  void Expect(const char* op) {
    if (IsOp(op))
      ++i_;
    else
      Fail(fmt::format("expected '{}', found '{}'", op, Peek().text));
  }
  static NodePtr Make(Kind kind, std::string name, std::vector<NodePtr> kids) {
    auto n = std::make_shared<CelNode>();
    n->kind = kind;
    n->name = std::move(name);
    n->kids = std::move(kids);
    return n;
  }

  NodePtr Or() {
    NodePtr n = And();
    while (!Failed() && IsOp("||")) {
      ++i_;
      n = Make(Kind::kOr, "||", {n, And()});
    }
    return n;
  }
  NodePtr And() {
    NodePtr n = Relation();
    while (!Failed() && IsOp("&&")) {
      ++i_;
      n = Make(Kind::kAnd, "&&", {n, Relation()});
    }
    return n;
  }
  NodePtr Relation() {
    NodePtr n = Unary();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (!IsOp(op)) continue;
      ++i_;
      return Make(Kind::kCompare, op, {n, Unary()});
    }
    if (Peek().kind == Token::Kind::kIdent && Peek().text == "in") {
      ++i_;
      return Make(Kind::kIn, "in", {n, Unary()});
    }
    return n;
  }
  NodePtr Unary() {
    if (IsOp("!")) {
      ++i_;
      return Make(Kind::kNot, "!", {Unary()});
    }
    if (IsOp("-")) {
      ++i_;
      if (Peek().kind != Token::Kind::kInt) Fail("unary minus on anything but an integer literal");
      return Make(Kind::kNeg, "-", {Member()});
    }
    return Member();
  }
  NodePtr Member() {
    NodePtr n = Primary();
    while (!Failed() && (IsOp(".") || IsOp("["))) {
      if (IsOp("[")) {
        ++i_;
        NodePtr key = Or();
        Expect("]");
        n = Make(Kind::kIndex, "[]", {n, key});
        continue;
      }
      ++i_;
      if (Peek().kind != Token::Kind::kIdent) {
        Fail(fmt::format("expected a field name after '.', found '{}'", Peek().text));
        break;
      }
      std::string field = t_[i_++].text;
      if (!IsOp("(")) {
        n = Make(Kind::kSelect, field, {n});
        continue;
      }
      if (!kMethods.count(field)) Fail(fmt::format("method {}()", field));
      std::vector<NodePtr> kids{n};
      Args(&kids);
      n = Make(Kind::kMethod, field, std::move(kids));
    }
    return n;
  }
  void Args(std::vector<NodePtr>* out) {
    Expect("(");
    while (!Failed() && !IsOp(")")) {
      out->push_back(Or());
      if (IsOp(","))
        ++i_;
      else if (!IsOp(")"))
        Fail(fmt::format("expected ',' or ')', found '{}'", Peek().text));
    }
    Expect(")");
  }
  NodePtr List() {
    std::vector<NodePtr> items;
    ++i_;
    while (!Failed() && !IsOp("]")) {
      items.push_back(Or());
      if (IsOp(","))
        ++i_;
      else if (!IsOp("]"))
        Fail(fmt::format("expected ',' or ']', found '{}'", Peek().text));
    }
    Expect("]");
    return Make(Kind::kList, "[]", std::move(items));
  }
  NodePtr Call(const std::string& fn) {
    std::vector<NodePtr> args;
    Args(&args);
    if (fn == "has") {
      if (args.size() != 1 || args[0]->kind != Kind::kSelect) Fail("has() needs one field selection");
      return Make(Kind::kHas, "has", std::move(args));
    }
    if ((fn != "quantity" && fn != "semver") || args.size() != 1) Fail(fmt::format("function {}()", fn));
    return Make(Kind::kCall, fn, std::move(args));
  }
  NodePtr Primary();

  std::vector<Token> t_;
  size_t i_ = 0;
  std::string err_;
};

NodePtr Parser::Primary() {
  const Token tok = Peek();
  auto literal = std::make_shared<CelNode>();
  if (tok.kind == Token::Kind::kInt) {
    ++i_;
    literal->literal.type = Type::kInt;
    auto [p, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), literal->literal.i);
    if (ec != std::errc()) Fail(fmt::format("integer {} out of range", tok.text));
    return literal;
  }
  if (tok.kind == Token::Kind::kString) {
    ++i_;
    literal->literal.type = Type::kString;
    literal->literal.s = tok.text;
    return literal;
  }
  if (IsOp("(")) {
    ++i_;
    NodePtr n = Or();
    Expect(")");
    return n;
  }
  if (IsOp("[")) return List();
  if (tok.kind != Token::Kind::kIdent) {
    Fail(tok.kind == Token::Kind::kEnd ? "unexpected end" : fmt::format("unexpected '{}'", tok.text));
    return nullptr;
  }
  ++i_;
  if (tok.text == "true" || tok.text == "false") {
    literal->literal.b = tok.text == "true";
    return literal;
  }
  if (IsOp("(")) return Call(tok.text);
  if (tok.text != "device") Fail(fmt::format("undeclared reference to '{}'", tok.text));
  return Make(Kind::kIdent, tok.text, {});
}

// ------------------------------------------------------------------------------------------- evaluation

// A value, or a runtime error (CEL's error value), or an unsupported construct.
struct Eval {
  enum class State { kValue, kError, kUnsupported } state = State::kValue;
  CelValue value;
  std::string message;
  static Eval Of(CelValue v) { return {State::kValue, std::move(v), {}}; }
  static Eval Err(std::string m) { return {State::kError, {}, std::move(m)}; }
  static Eval No(std::string m) { return {State::kUnsupported, {}, std::move(m)}; }
  bool ok() const { return state == State::kValue; }
};

CelValue Bool(bool b) {
  CelValue v;
  v.b = b;
  return v;
}
CelValue Int(int64_t i) {
  CelValue v;
  v.type = Type::kInt;
  v.i = i;
  return v;
}

const char* TypeName(Type t) {
  static const char* kNames[] = {"bool", "int", "string", "quantity", "semver", "list", "map"};
  return kNames[static_cast<int>(t)];
}

CelValue AttributeValue(const DraAttribute& a) {
  CelValue v;
  if (const bool* b = std::get_if<bool>(&a))
    v = Bool(*b);
  else if (const int64_t* i = std::get_if<int64_t>(&a))
    v = Int(*i);
  else if (const std::string* s = std::get_if<std::string>(&a))
    v.type = Type::kString, v.s = *s;
  else
    v.type = Type::kVersion, v.v = std::get<DraVersion>(a);
  return v;
}

// Splits "domain/name" (unqualified names belong to `driver`).
std::pair<std::string, std::string> Qualified(const std::string& key, const std::string& driver) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return {driver, key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

CelValue MapOf(CelMap m) {
  CelValue v;
  v.type = Type::kMap;
  v.map = std::make_shared<const CelMap>(std::move(m));
  return v;
}

CelValue DeviceView(const DraDevice& d, const std::string& driver) {
  std::map<std::string, CelMap> attrs, caps;
  for (const auto& [k, a] : d.attributes) {
    auto [dom, id] = Qualified(k, driver);
    attrs[dom][id] = AttributeValue(a);
  }
  for (const auto& [k, q] : d.capacity_milli) {
    auto [dom, id] = Qualified(k, driver);
    CelValue v;
    v.type = Type::kQuantity;
    v.i = q;
    caps[dom][id] = v;
  }
  CelMap a, c, device;
  for (auto& [dom, m] : attrs) a[dom] = MapOf(std::move(m));
  for (auto& [dom, m] : caps) c[dom] = MapOf(std::move(m));
  CelValue drv;
  drv.type = Type::kString;
  drv.s = driver;
  device["driver"] = drv;
  device["attributes"] = MapOf(std::move(a));
  device["capacity"] = MapOf(std::move(c));
  device["allowMultipleAllocations"] = Bool(d.allow_multiple_allocations);
  return MapOf(std::move(device));
}

bool Equal(const CelValue& a, const CelValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::kBool:
      return a.b == b.b;
    case Type::kInt:
    case Type::kQuantity:
      return a.i == b.i;
    case Type::kString:
      return a.s == b.s;
    case Type::kVersion:
      return CompareDraVersions(a.v, b.v) == 0;
    case Type::kList:
      return a.list.size() == b.list.size() &&
             std::equal(a.list.begin(), a.list.end(), b.list.begin(), Equal);
    case Type::kMap:
      return a.map == b.map;
  }
  return false;
}

class Evaluator {
 public:
  explicit Evaluator(CelValue device) : device_(std::move(device)) {}
  Eval Run(const CelNode& n);

 private:
  Eval Logic(const CelNode& n, bool is_or);
  Eval Compare(const CelNode& n);
  Eval In(const CelNode& n);
  Eval Select(const CelNode& n);
  Eval Index(const CelNode& n);
  Eval Call(const CelNode& n);
  Eval Method(const CelNode& n);
  Eval Has(const CelNode& n);
  CelValue device_;
};

Eval Evaluator::Run(const CelNode& n) {
  switch (n.kind) {
    case Kind::kLiteral:
      return Eval::Of(n.literal);
    case Kind::kIdent:
      return Eval::Of(device_);
    case Kind::kList: {
      CelValue v;
      v.type = Type::kList;
      for (const NodePtr& k : n.kids) {
        Eval e = Run(*k);
        if (!e.ok()) return e;
        v.list.push_back(e.value);
      }
      return Eval::Of(v);
    }
    case Kind::kNot:
    case Kind::kNeg: {
      Eval e = Run(*n.kids[0]);
      if (!e.ok()) return e;
      const Type want = n.kind == Kind::kNot ? Type::kBool : Type::kInt;
      if (e.value.type != want)
        return Eval::Err(fmt::format("no such overload: {}{}", n.name, TypeName(e.value.type)));
      return Eval::Of(n.kind == Kind::kNot ? Bool(!e.value.b) : Int(-e.value.i));
    }
    case Kind::kAnd:
      return Logic(n, false);
    case Kind::kOr:
      return Logic(n, true);
    case Kind::kCompare:
      return Compare(n);
    case Kind::kIn:
      return In(n);
    case Kind::kSelect:
      return Select(n);
    case Kind::kIndex:
      return Index(n);
    case Kind::kCall:
      return Call(n);
    case Kind::kMethod:
      return Method(n);
    case Kind::kHas:
      return Has(n);
  }
  return Eval::No("unknown node");
}

// CEL's commutative && and ||: a deciding side wins over an error on the other side.
Eval Evaluator::Logic(const CelNode& n, bool is_or) {
  Eval a = Run(*n.kids[0]);
  Eval b = Run(*n.kids[1]);
  for (const Eval* e : {&a, &b})
    if (e->state == Eval::State::kUnsupported) return *e;
  for (const Eval* e : {&a, &b})
    if (e->ok() && e->value.type == Type::kBool && e->value.b == is_or) return Eval::Of(Bool(is_or));
  for (const Eval* e : {&a, &b}) {
    if (!e->ok()) return *e;
    if (e->value.type != Type::kBool)
      return Eval::Err(fmt::format("no such overload: {} on {}", n.name, TypeName(e->value.type)));
  }
  return Eval::Of(Bool(!is_or));
}

Eval Evaluator::Compare(const CelNode& n) {
  Eval a = Run(*n.kids[0]);
  if (!a.ok()) return a;
  Eval b = Run(*n.kids[1]);
  if (!b.ok()) return b;
  const CelValue &x = a.value, &y = b.value;
  if (x.type != y.type)
    return Eval::Err(fmt::format("no such overload: {} {} {}", TypeName(x.type), n.name, TypeName(y.type)));
  if (n.name == "==" || n.name == "!=") return Eval::Of(Bool(Equal(x, y) == (n.name == "==")));
  int c = 0;
  if (x.type == Type::kInt || x.type == Type::kBool)
    c = x.type == Type::kInt ? (x.i > y.i) - (x.i < y.i) : x.b - y.b;
  else if (x.type == Type::kString)
    c = x.s.compare(y.s) < 0 ? -1 : x.s == y.s ? 0 : 1;
  else
    return Eval::Err(fmt::format("no such overload: {} on {} (use compareTo)", n.name, TypeName(x.type)));
  const bool r = n.name == "<" ? c < 0 : n.name == "<=" ? c <= 0 : n.name == ">" ? c > 0 : c >= 0;
  return Eval::Of(Bool(r));
}

Eval Evaluator::In(const CelNode& n) {
  Eval a = Run(*n.kids[0]);
  if (!a.ok()) return a;
  Eval b = Run(*n.kids[1]);
  if (!b.ok()) return b;
  if (b.value.type == Type::kList)
    return Eval::Of(Bool(std::any_of(b.value.list.begin(), b.value.list.end(),
                                     [&](const CelValue& v) { return Equal(a.value, v); })));
  if (b.value.type == Type::kMap && a.value.type == Type::kString)
    return Eval::Of(Bool(b.value.map->count(a.value.s) > 0));
  return Eval::Err(fmt::format("no such overload: {} in {}", TypeName(a.value.type), TypeName(b.value.type)));
}

Eval Evaluator::Select(const CelNode& n) {
  Eval base = Run(*n.kids[0]);
  if (!base.ok()) return base;
  if (base.value.type != Type::kMap)
    return Eval::Err(fmt::format("no such field '{}' on {}", n.name, TypeName(base.value.type)));
  auto it = base.value.map->find(n.name);
  if (it == base.value.map->end()) return Eval::Err(fmt::format("no such key: {}", n.name));
  return Eval::Of(it->second);
}

Eval Evaluator::Index(const CelNode& n) {
  Eval base = Run(*n.kids[0]);
  if (!base.ok()) return base;
  Eval key = Run(*n.kids[1]);
  if (!key.ok()) return key;
  const CelValue &b = base.value, &k = key.value;
  if (b.type == Type::kMap && k.type == Type::kString) {
    auto it = b.map->find(k.s);
    if (it == b.map->end()) return Eval::Err(fmt::format("no such key: {}", k.s));
    return Eval::Of(it->second);
  }
  if (b.type == Type::kList && k.type == Type::kInt) {
    if (k.i < 0 || k.i >= static_cast<int64_t>(b.list.size())) return Eval::Err("index out of range");
    return Eval::Of(b.list[static_cast<size_t>(k.i)]);
  }
  return Eval::Err(fmt::format("no such overload: {}[{}]", TypeName(b.type), TypeName(k.type)));
}

Eval Evaluator::Call(const CelNode& n) {
  Eval arg = Run(*n.kids[0]);
  if (!arg.ok()) return arg;
  if (arg.value.type != Type::kString)
    return Eval::Err(fmt::format("no such overload: {}({})", n.name, TypeName(arg.value.type)));
  CelValue v;
  if (n.name == "quantity") {
    auto q = ParseQuantityMilli(arg.value.s);
    if (!q.ok()) return Eval::Err(q.error());
    v.type = Type::kQuantity;
    v.i = *q;
  } else {
    auto ver = ParseDraVersion(arg.value.s);
    if (!ver.ok()) return Eval::Err(ver.error());
    v.type = Type::kVersion;
    v.v = *ver;
  }
  return Eval::Of(v);
}

Eval StringMethod(const std::string& name, const std::string& s, const std::vector<CelValue>& args) {
  CelValue out;
  if (args.empty() && (name == "lowerAscii" || name == "upperAscii")) {
    out.type = Type::kString;
    out.s = s;
    for (char& c : out.s)
      c = static_cast<char>(name == "lowerAscii" ? std::tolower(static_cast<unsigned char>(c))
                                                 : std::toupper(static_cast<unsigned char>(c)));
    return Eval::Of(out);
  }
  if (args.empty() && name == "size") return Eval::Of(Int(static_cast<int64_t>(s.size())));
  if (args.size() != 1 || args[0].type != Type::kString)
    return Eval::No(fmt::format("method string.{}", name));
  const std::string& a = args[0].s;
  if (name == "startsWith") return Eval::Of(Bool(s.rfind(a, 0) == 0));
  if (name == "endsWith")
    return Eval::Of(Bool(s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0));
  if (name == "contains") return Eval::Of(Bool(s.find(a) != std::string::npos));
  return Eval::No(fmt::format("method string.{}", name));
}

Eval Evaluator::Method(const CelNode& n) {
  Eval target = Run(*n.kids[0]);
  if (!target.ok()) return target;
  std::vector<CelValue> args;
  for (size_t k = 1; k < n.kids.size(); ++k) {
    Eval a = Run(*n.kids[k]);
    if (!a.ok()) return a;
    args.push_back(a.value);
  }
  const CelValue& t = target.value;
  if (t.type == Type::kString) return StringMethod(n.name, t.s, args);
  if ((t.type == Type::kList || t.type == Type::kMap) && n.name == "size" && args.empty())
    return Eval::Of(Int(static_cast<int64_t>(t.type == Type::kList ? t.list.size() : t.map->size())));
  const bool comparable = t.type == Type::kQuantity || t.type == Type::kVersion;
  if (!comparable || args.size() != 1 || n.name == "size" || n.name == "startsWith" || n.name == "endsWith" ||
      n.name == "contains" || n.name == "lowerAscii" || n.name == "upperAscii")
    return Eval::No(fmt::format("method {}.{}", TypeName(t.type), n.name));
  if (args[0].type != t.type)
    return Eval::Err(
        fmt::format("no such overload: {}.{}({})", TypeName(t.type), n.name, TypeName(args[0].type)));
  const int c =
      t.type == Type::kQuantity ? (t.i > args[0].i) - (t.i < args[0].i) : CompareDraVersions(t.v, args[0].v);
  if (n.name == "compareTo") return Eval::Of(Int(c));
  return Eval::Of(Bool(n.name == "isGreaterThan" ? c > 0 : c < 0));
}

Eval Evaluator::Has(const CelNode& n) {
  const CelNode& sel = *n.kids[0];
  Eval base = Run(*sel.kids[0]);
  if (!base.ok()) return base;
  if (base.value.type != Type::kMap) return Eval::Err(fmt::format("has() on {}", TypeName(base.value.type)));
  return Eval::Of(Bool(base.value.map->count(sel.name) > 0));
}

}  // namespace

CelSelector CelSelector::Compile(const std::string& expression) {
  CelSelector s;
  s.expression_ = expression;
  Unsupported err;
  std::vector<Token> tokens = Tokenize(expression, &err);
  if (!err.why.empty()) {
    s.unsupported_ =
        fmt::format("CEL expression '{}' is outside the subset Tessera evaluates: {}", expression, err.why);
    return s;
  }
  Parser p(std::move(tokens));
  s.root_ = p.Parse();
  if (p.Failed())
    s.unsupported_ =
        fmt::format("CEL expression '{}' is outside the subset Tessera evaluates: {}", expression, p.error());
  return s;
}

CelOutcome CelSelector::Evaluate(const DraDevice& device, const std::string& driver) const {
  if (root_ == nullptr) return {CelVerdict::kUnsupported, unsupported_};
  Evaluator ev(DeviceView(device, driver));
  Eval e = ev.Run(*root_);
  if (e.state == Eval::State::kUnsupported)
    return {CelVerdict::kUnsupported,
            fmt::format("CEL expression '{}' is outside the subset Tessera evaluates: {}", expression_,
                        e.message)};
  if (e.state == Eval::State::kError)
    return {CelVerdict::kError,
            fmt::format("CEL expression '{}' on device {}: {}", expression_, device.name, e.message)};
  if (e.value.type != Type::kBool)
    return {CelVerdict::kError,
            fmt::format("CEL expression '{}' gives a {}, not a bool", expression_, TypeName(e.value.type))};
  return {e.value.b ? CelVerdict::kMatch : CelVerdict::kNoMatch, {}};
}

}  // namespace tessera
