// Mutations for the reader fuzz driver (see Mutate.h). The interesting tokens are the values
// that break readers: numbers at and past the integer and float limits, negative and fractional
// sizes, YAML anchors, tags and merge keys, JSON's structural characters, control bytes.
#include "Mutate.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace tp::fuzz {
namespace {

const std::vector<std::string>& interesting_tokens() {
  static const std::vector<std::string> t = {"0",
                                             "-1",
                                             "-0",
                                             "1.5",
                                             "1e309",
                                             "-1e309",
                                             "1e30",
                                             "nan",
                                             ".nan",
                                             ".inf",
                                             "inf",
                                             "2147483647",
                                             "2147483648",
                                             "4294967296",
                                             "9223372036854775807",
                                             "9223372036854775808",
                                             "-9223372036854775809",
                                             "18446744073709551616",
                                             "99999999999999999999999",
                                             "0x10",
                                             "true",
                                             "null",
                                             "~",
                                             "[]",
                                             "{}",
                                             "[[[[",
                                             "{{{{",
                                             "\"",
                                             "'",
                                             ",",
                                             ":",
                                             ": ",
                                             "- ",
                                             "\n- ",
                                             "&a ",
                                             "*a",
                                             "!!binary ",
                                             "!!str ",
                                             "<<: ",
                                             "? ",
                                             "|",
                                             ">",
                                             "#",
                                             "%YAML 1.2\n---\n",
                                             "\n---\n",
                                             "\t",
                                             "\\u0000",
                                             "\\ud800",
                                             "\xff\xfe",
                                             "\xc3\xa9",
                                             "=",
                                             "==",
                                             "|",
                                             "||",
                                             ",,",
                                             "=,",
                                             "M=",
                                             "=1"};
  return t;
}

const char kInterestingBytes[] = {'\0', '\xff', '\n', '\r', ':', '[', ']',  '{', '}', '"',
                                  '\'', ',',    '-',  '=',  '|', '.', 'e',  '9', '0', ' ',
                                  '\t', '#',    '&',  '*',  '!', '%', '\\', '?', '>', '~'};

size_t below(Rng& rng, size_t n) {
  return n == 0 ? 0 : rng() % n;
}

/// [begin, end) of every token: a run of letters, digits, '_', '.', '-', '+', or one other
/// non-space character.
std::vector<std::pair<size_t, size_t>> tokens(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  auto word = [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '+';
  };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    if (word(c))
      while (j < s.size() && word(static_cast<unsigned char>(s[j])))
        ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

std::string random_token(const std::string& s, Rng& rng) {
  auto t = tokens(s);
  if (t.empty()) return interesting_tokens()[below(rng, interesting_tokens().size())];
  auto [b, e] = t[below(rng, t.size())];
  return s.substr(b, e - b);
}

void mutate_once(std::string& s, const std::vector<std::string>& others, Rng& rng) {
  const auto& interesting = interesting_tokens();
  switch (below(rng, 10)) {
  case 0: // flip one bit
    if (!s.empty()) s[below(rng, s.size())] ^= static_cast<char>(1u << below(rng, 8));
    break;
  case 1: // one byte becomes an interesting one
    if (!s.empty())
      s[below(rng, s.size())] = kInterestingBytes[below(rng, sizeof kInterestingBytes)];
    break;
  case 2: // truncate
    s.resize(below(rng, s.size() + 1));
    break;
  case 3: { // delete a range
    size_t b = below(rng, s.size() + 1), n = below(rng, std::min<size_t>(s.size() - b, 64) + 1);
    s.erase(b, n);
    break;
  }
  case 4: { // duplicate a range
    size_t b = below(rng, s.size() + 1), n = below(rng, std::min<size_t>(s.size() - b, 256) + 1);
    s.insert(below(rng, s.size() + 1), s.substr(b, n));
    break;
  }
  case 5: // insert an interesting token
    s.insert(below(rng, s.size() + 1), interesting[below(rng, interesting.size())]);
    break;
  case 6: { // splice: a prefix of this input and a suffix of another seed
    const std::string& o = others.empty() ? s : others[below(rng, others.size())];
    s = s.substr(0, below(rng, s.size() + 1)) + o.substr(below(rng, o.size() + 1));
    break;
  }
  case 7: { // swap two tokens
    auto t = tokens(s);
    if (t.size() < 2) break;
    size_t i = below(rng, t.size()), j = below(rng, t.size());
    if (i == j) break;
    if (i > j) std::swap(i, j);
    auto [ib, ie] = t[i];
    auto [jb, je] = t[j];
    s = s.substr(0, ib) + s.substr(jb, je - jb) + s.substr(ie, jb - ie) + s.substr(ib, ie - ib) +
        s.substr(je);
    break;
  }
  case 8: { // a token becomes an interesting one, or one borrowed from another seed
    auto t = tokens(s);
    if (t.empty()) break;
    auto [b, e] = t[below(rng, t.size())];
    std::string with = below(rng, 2) || others.empty()
                           ? interesting[below(rng, interesting.size())]
                           : random_token(others[below(rng, others.size())], rng);
    s.replace(b, e - b, with);
    break;
  }
  default: { // a number changes to a nearby or extreme value
    auto t = tokens(s);
    std::vector<std::pair<size_t, size_t>> numbers;
    for (auto [b, e] : t)
      if (std::isdigit(static_cast<unsigned char>(s[b]))) numbers.emplace_back(b, e);
    if (numbers.empty()) break;
    auto [b, e] = numbers[below(rng, numbers.size())];
    static const char* values[] = {"0",    "1",     "-1",   "3",          "7",
                                   "65",   "127",   "4096", "1000000000", "2147483648",
                                   "1e19", "1e400", "0.5",  "-2"};
    s.replace(b, e - b, values[below(rng, sizeof values / sizeof *values)]);
    break;
  }
  }
}

void collect(nlohmann::json& j, std::vector<nlohmann::json*>& out) {
  out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j)
      collect(child, out);
}

/// Structure-aware edits of a JSON input: a value of another type or past a limit where the
/// reader expects one kind (what text edits rarely make without breaking the syntax), a copy of
/// another node, or a key or element removed.
std::string mutate_json(nlohmann::json j, Rng& rng) {
  static const nlohmann::json values[] = {0,
                                          -1,
                                          2.5,
                                          1e19,
                                          -1e19,
                                          1e300,
                                          9223372036854775807LL,
                                          18446744073709551615ULL,
                                          "",
                                          "x",
                                          "bf16",
                                          nlohmann::json::array(),
                                          nlohmann::json::object(),
                                          nullptr,
                                          true};
  for (size_t n = 1 + below(rng, 3); n > 0; --n) {
    std::vector<nlohmann::json*> nodes;
    collect(j, nodes);
    nlohmann::json& at = *nodes[below(rng, nodes.size())];
    switch (below(rng, 3)) {
    case 0:
      at = values[below(rng, sizeof values / sizeof *values)];
      break;
    case 1:
      at = nlohmann::json(*nodes[below(rng, nodes.size())]); // copy first: it may be inside `at`
      break;
    default:
      if (at.is_object() && !at.empty())
        at.erase(std::next(at.begin(), static_cast<long>(below(rng, at.size()))).key());
      else if (at.is_array() && !at.empty())
        at.erase(at.begin() + static_cast<long>(below(rng, at.size())));
    }
  }
  return j.dump(below(rng, 2) ? 2 : -1);
}

} // namespace

std::string mutate(const std::string& seed, const std::vector<std::string>& others, Rng& rng,
                   size_t max_size) {
  std::string s = seed;
  if (below(rng, 2)) { // half the mutants of a JSON seed are edited as JSON
    nlohmann::json j = nlohmann::json::parse(seed, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) {
      s = mutate_json(std::move(j), rng);
      if (below(rng, 2)) return s.size() > max_size ? s.substr(0, max_size) : s;
    }
  }
  for (size_t n = 1 + below(rng, 4); n > 0; --n) {
    mutate_once(s, others, rng);
    if (s.size() > max_size) s.resize(max_size);
  }
  return s;
}

} // namespace tp::fuzz
