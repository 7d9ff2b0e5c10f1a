#pragma once
/// \file
/// io::check_xml_nesting — refuses XML nested deeper than a bound before it
/// reaches a parser that recurses once per element (libsbml's reader and its
/// MathML ASTs: ~10 000 nested elements overflow the stack).

#include <cstddef>
#include <string>
#include <string_view>

namespace costate::io {

/// The deepest element nesting check_xml_nesting accepts by default. A real
/// SBML file nests its deepest MathML a few dozen levels; 1000 keeps
/// libsbml's and the importer's recursion far from any stack's end.
inline constexpr std::size_t kMaxXmlNesting = 1000;

/// Throws costate::Error naming `name`, the line and `limit` when elements in
/// `xml` nest deeper than `limit`. Comments, CDATA, processing instructions,
/// declarations, quoted attribute values and self-closing tags are skipped as
/// XML defines them; anything malformed is left for the real parser to name.
void check_xml_nesting(std::string_view xml, const std::string& name,
                       std::size_t limit = kMaxXmlNesting);

/// The same on the contents of the file at `path` (no error when it cannot
/// be read: the caller's reader reports that).
void check_xml_file_nesting(const std::string& path, std::size_t limit = kMaxXmlNesting);

}  // namespace costate::io
