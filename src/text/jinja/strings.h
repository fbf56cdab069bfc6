// Python str operations shared by the filters and the str methods: strip, split, splitlines,
// replace, find (code point index), title/capitalize, HTML escape.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brisk::jinja::pystr {

// str.strip / lstrip / rstrip; `chars` nullopt = whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and rsplit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// str.find / rfind in code points, within [start, end) code points; -1 when absent.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse);
int64_t count(std::string_view s, std::string_view sub);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string jinja_title(std::string_view s); // the |title filter (words split at -\s({[<)
std::string html_escape(std::string_view s);
bool is_ascii(std::string_view s);

}  // namespace brisk::jinja::pystr
