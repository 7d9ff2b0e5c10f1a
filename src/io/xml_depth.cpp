#include "costate/io/xml_depth.hpp"

#include <cctype>
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
  check_xml_nesting(text.str(), path, limit);
}

}  // namespace costate::io
