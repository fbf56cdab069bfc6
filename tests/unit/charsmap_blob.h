// Test helpers for SentencePiece charsmaps: a blob in darts-clone's double-array layout built
// from a key -> replacement map (as SentencePiece compiles its normalization rules), and base64
// (as tokenizer.json stores the blob).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace brisk::testing {

// A charsmap blob for `map` (key -> replacement), laid out as SentencePiece writes it: the trie
// size, a darts-clone double array (unit = label | has_leaf << 8 | offset << 10; a key's value
// sits in a leaf unit, bit 31 set, under label 0) and the NUL-ended replacements.
inline std::string charsmap_blob(const std::map<std::string, std::string>& map) {
  struct Node {
    std::map<uint8_t, int> next;
    int64_t value = -1;
  };
  std::vector<Node> nodes(1);
  std::string strings;
  for (const auto& [key, rep] : map) {
    int n = 0;
    for (char ch : key) {
      const uint8_t c = uint8_t(ch);
      if (!nodes[size_t(n)].next.count(c)) {
        nodes[size_t(n)].next[c] = int(nodes.size());
        nodes.emplace_back();
      }
      n = nodes[size_t(n)].next[c];
    }
    nodes[size_t(n)].value = int64_t(strings.size());
    strings += rep;
    strings += '\0';
  }
  std::map<uint32_t, uint32_t> units;  // index -> unit
  std::vector<std::pair<int, std::pair<uint32_t, uint8_t>>> queue = {{0, {0, 0}}};  // node, (index, label)
  units[0] = 0;
  uint32_t lowest_free = 1;
  for (size_t q = 0; q < queue.size(); ++q) {
    const auto [n, at] = queue[q];
    const auto [id, label] = at;
    const Node& node = nodes[size_t(n)];
    std::vector<uint32_t> labels;
    if (node.value >= 0) labels.push_back(0);
    for (const auto& [c, child] : node.next) labels.push_back(c);
    if (labels.empty()) {  // only an empty map's root
      units[id] = uint32_t(label);
      continue;
    }
    auto taken = [&](uint32_t o) {
      if (o == 0 || o >= (1u << 21)) return true;
      for (uint32_t l : labels)
        if ((id ^ o ^ l) == 0 || units.count(id ^ o ^ l)) return true;
      return false;
    };
    // Place the first label on a free unit, from the lowest free one up.
    while (units.count(lowest_free)) ++lowest_free;
    uint32_t pos = lowest_free, off = id ^ pos ^ labels[0];
    while (taken(off)) {
      do ++pos; while (units.count(pos));
      off = id ^ pos ^ labels[0];
    }
    units[id] = uint32_t(label) | (node.value >= 0 ? 1u << 8 : 0u) | (off << 10);
    if (node.value >= 0) units[id ^ off] = (1u << 31) | uint32_t(node.value);
    for (const auto& [c, child] : node.next) {
      units[id ^ off ^ c] = 0;  // reserved, filled when dequeued
      queue.push_back({child, {id ^ off ^ c, c}});
    }
  }
  // Whole blocks of 256 units, as darts-clone writes them: a node's child base (index ^ offset)
  // then lies inside the array too.
  const uint32_t n_units = (units.rbegin()->first + 1 + 255) / 256 * 256;
  std::string blob;
  auto put = [&](uint32_t u) {
    for (int b = 0; b < 4; ++b) blob += char((u >> (8 * b)) & 0xFF);
  };
  put(4 * n_units);
  for (uint32_t i = 0; i < n_units; ++i) put(units.count(i) ? units[i] : 0);
  return blob + strings;
}

inline std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    if (i + 2 < in.size()) v |= uint32_t(uint8_t(in[i + 2]));
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[v & 63] : '=';
  }
  return out;
}

}  // namespace brisk::testing
