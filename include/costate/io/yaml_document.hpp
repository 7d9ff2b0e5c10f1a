#pragma once
/// \file
/// io::load_yaml_document — the one way costate reads a YAML input: exactly
/// one document, no key twice in any map, nesting within yaml-cpp's bound;
/// anything else is a costate::Error naming the file and the line(s).
/// Includes yaml-cpp: for .cpp files that read YAML, not for public headers.

#include <yaml-cpp/yaml.h>

#include <string>

namespace costate::io {

/// Parses `text` (named `path` in errors). Refuses, with the line of each
/// offending place:
///  - malformed YAML (yaml-cpp's message, line and column);
///  - nesting deeper than yaml-cpp parses (it stops at about 500 levels);
///  - a second document (`---` after a first one): costate reads one;
///  - a key that appears twice in the same map, at any depth (yaml-cpp
///    would silently keep the first value): both lines are named.
/// An empty text gives a null node.
YAML::Node load_yaml_document(const std::string& text, const std::string& path);

}  // namespace costate::io
