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
/// be read: the caller's reader reports that). Also check_xml_utf8.
void check_xml_file_nesting(const std::string& path, std::size_t limit = kMaxXmlNesting);

/// Throws costate::Error naming `name`, the line, the column and the byte
/// when `xml` is not UTF-8 (an invalid, overlong or truncated sequence, a
/// surrogate, a code point above U+10FFFF). SBML documents are UTF-8; a
/// document whose XML declaration names another encoding is left to the
/// parser. Checked before libsbml: libsbml 5.19 leaks the MathML nodes it
/// has read when libxml2 stops on an encoding error inside a <math>
/// element (296 bytes, reproduced with libsbml alone; found by the sbml
/// fuzzer), and the refusal names where the bad byte is.
void check_xml_utf8(std::string_view xml, const std::string& name);

}  // namespace costate::io
