#include "costate/io/xml_depth.hpp"

#include <cctype>
#include <string>
#include <fstream>
#include <sstream>

#include "costate/core/error.hpp"

namespace costate::io {

void check_xml_nesting(std::string_view xml, const std::string& name, std::size_t limit) {
  std::size_t depth = 0, line = 1, i = 0;
  const std::size_t n = xml.size();
  // Advances i past `end` (counting lines); false when the text ends first.
  auto skip_past = [&](std::string_view end) {
    const std::size_t at = xml.find(end, i);
    const std::size_t stop = at == std::string_view::npos ? n : at + end.size();
    for (; i < stop; ++i)
      if (xml[i] == '\n') ++line;
    return at != std::string_view::npos;
  };
  while (i < n) {
    if (xml[i] != '<') {
      if (xml[i] == '\n') ++line;
      ++i;
      continue;
    }
    const std::string_view rest = xml.substr(i);
    if (rest.starts_with("<!--")) {
      if (!skip_past("-->")) return;
    } else if (rest.starts_with("<![CDATA[")) {
      if (!skip_past("]]>")) return;
    } else if (rest.starts_with("<?")) {
      if (!skip_past("?>")) return;
    } else if (rest.starts_with("<!")) {
      if (!skip_past(">")) return;  // a declaration (no internal subsets in SBML)
    } else if (rest.starts_with("</")) {
      if (depth > 0) --depth;
      if (!skip_past(">")) return;
    } else {
      // A start tag: to its '>' outside quoted attribute values.
      const std::size_t tag_line = line;
      char quote = 0;
      char last = 0;
      ++i;
      for (; i < n; ++i) {
        const char c = xml[i];
        if (c == '\n') ++line;
        if (quote) {
          if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '>') {
          break;
        }
        if (!std::isspace(static_cast<unsigned char>(c))) last = c;
      }
      if (i >= n) return;
      ++i;  // '>'
      if (last == '/') continue;  // <empty/>
      if (++depth > limit)
        throw Error(name + ":" + std::to_string(tag_line) + ": XML elements nest deeper than " +
                    std::to_string(limit) +
                    " levels; costate refuses such files before parsing them (a parser that "
                    "recurses per element would overflow its stack). Real models nest a few "
                    "dozen levels: check how this file was generated");
    }
  }
}

void check_xml_file_nesting(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::ostringstream text;
  text << in.rdbuf();
  check_xml_utf8(text.str(), path);
  check_xml_nesting(text.str(), path, limit);
}

namespace {

/// The encoding an XML declaration names ("" when there is none), lower case.
std::string declared_encoding(std::string_view xml) {
  if (xml.starts_with("\xEF\xBB\xBF")) xml.remove_prefix(3);  // a byte-order mark
  if (!xml.starts_with("<?xml")) return {};
  const std::string_view decl = xml.substr(0, xml.find("?>"));
  const std::size_t at = decl.find("encoding");
  if (at == std::string_view::npos) return {};
  const std::size_t open = decl.find_first_of("\"'", at);
  if (open == std::string_view::npos) return {};
  const std::size_t close = decl.find(decl[open], open + 1);
  if (close == std::string_view::npos) return {};
  std::string e(decl.substr(open + 1, close - open - 1));
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

}  // namespace

void check_xml_utf8(std::string_view xml, const std::string& name) {
  const std::string encoding = declared_encoding(xml);
  if (!encoding.empty() && encoding != "utf-8" && encoding != "utf8") return;
  std::size_t line = 1, line_start = 0;
  const std::size_t n = xml.size();
  for (std::size_t i = 0; i < n;) {
    const auto b = static_cast<unsigned char>(xml[i]);
    if (b < 0x80) {
      if (b == '\n') {
        ++line;
        line_start = i + 1;
      }
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte (RFC 3629's
    // table: no overlong forms, no surrogates, nothing above U+10FFFF).
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC) len = 3;
    else if (b == 0xED) len = 3, hi = 0x9F;
    else if (b >= 0xEE && b <= 0xEF) len = 3;
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(xml[i + k]);
      ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    }
    if (!ok) {
      static const char* hex = "0123456789ABCDEF";
      const std::string byte = std::string("0x") + hex[b >> 4] + hex[b & 15];
      throw Error(name + ":" + std::to_string(line) + ":" + std::to_string(i - line_start + 1) +
                  ": byte " + byte + " is not UTF-8 (" +
                  (len == 0 ? "it cannot start a character" : "an invalid or truncated sequence") +
                  "); SBML documents are UTF-8: re-save the file as UTF-8");
    }
    i += len;
  }
}

}  // namespace costate::io
