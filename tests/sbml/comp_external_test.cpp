// comp external model definitions: a model whose submodel is defined in
// another file is flattened when that file exists next to the document (its
// `source` is relative to the document's folder, not to the working folder),
// and refused with the file, the line and the missing source's name when it
// does not. The SBML Test Suite's cases with external model definitions are
// read the same way (skipped when the suite's folder is absent).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "costate/core/error.hpp"
#include "costate/sbml/model.hpp"

namespace {

namespace fs = std::filesystem;
using costate::sbml::Model;

const std::string kHead =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<sbml xmlns=\"http://www.sbml.org/sbml/level3/version1/core\" "
    "xmlns:comp=\"http://www.sbml.org/sbml/level3/version1/comp/version1\" level=\"3\" "
    "version=\"1\" comp:required=\"true\">\n";

/// The external file: a model 'inner' with dx/dt = k·x (x(0) = 2, k = 0.7).
const std::string kInner =
    kHead +
    "<model id=\"inner\"><listOfParameters>"
    "<parameter id=\"x\" value=\"2\" constant=\"false\"/>"
    "<parameter id=\"k\" value=\"0.7\" constant=\"true\"/></listOfParameters>"
    "<listOfRules><rateRule variable=\"x\"><math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
    "<apply><times/><ci>k</ci><ci>x</ci></apply></math></rateRule></listOfRules></model>\n"
    "</sbml>\n";

/// The document: one submodel 'sub' of the external definition 'ext',
/// whose source is `source`; the definition sits on line 4.
std::string outer(const std::string& source) {
  return kHead +
         "<comp:listOfExternalModelDefinitions>\n"
         "<comp:externalModelDefinition comp:id=\"ext\" comp:source=\"" + source +
         "\" comp:modelRef=\"inner\"/>\n"
         "</comp:listOfExternalModelDefinitions>\n"
         "<model id=\"top\"><comp:listOfSubmodels><comp:submodel comp:id=\"sub\" "
         "comp:modelRef=\"ext\"/></comp:listOfSubmodels></model>\n</sbml>\n";
}

class CompExternal : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_comp_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models" / "lib");
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  static std::string error_of(const std::function<void()>& read) {
    try {
      read();
    } catch (const costate::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
  fs::path dir_;
};

/// The flattened model: the submodel's symbols prefixed "sub__", its rate
/// rule the right-hand side (exact: one product of the stated values).
void expect_flattened(const Model& m) {
  ASSERT_EQ(m.state_names, (std::vector<std::string>{"sub__x"}));
  const long k = m.parameter_index("sub__k");
  ASSERT_GE(k, 0);
  EXPECT_EQ(m.parameters[static_cast<std::size_t>(k)], 0.7);
  EXPECT_EQ(m.initial_values(m.parameters), (std::vector<double>{2.0}));
  std::vector<double> f(1);
  m.equations.rhs<double>(0.0, std::vector<double>{3.0}, m.parameters, f);
  EXPECT_EQ(f[0], 0.7 * 3.0);
}

TEST_F(CompExternal, SourceIsReadRelativeToTheDocumentsFolder) {
  write("models/lib/inner.xml", kInner);
  // The working folder is not models/: the source resolves against the
  // document's own folder.
  expect_flattened(costate::sbml::read_file(write("models/outer.xml", outer("lib/inner.xml"))));
  // An absolute path and a file: URI name the same file.
  expect_flattened(costate::sbml::read_file(
      write("models/absolute.xml", outer((dir_ / "models/lib/inner.xml").string()))));
  expect_flattened(costate::sbml::read_file(
      write("models/uri.xml", outer("file://" + (dir_ / "models/lib/inner.xml").string()))));
}

TEST_F(CompExternal, DocumentInMemoryReadsFromItsBaseFolder) {
  write("models/lib/inner.xml", kInner);
  costate::sbml::ReadOptions options;
  options.base_folder = (dir_ / "models").string();
  expect_flattened(costate::sbml::read_string(outer("lib/inner.xml"), "outer.xml", options));
}

TEST_F(CompExternal, MissingSourceIsRefusedByName) {
  const std::string path = write("models/outer.xml", outer("lib/absent.xml"));
  const std::string e = error_of([&] { (void)costate::sbml::read_file(path); });
  EXPECT_NE(e.find(path + ":4: externalModelDefinition 'ext' (source 'lib/absent.xml')"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "models" / "lib/absent.xml").string()), std::string::npos) << e;

  // In memory without a base folder: looked for in the working folder, and
  // named as such.
  write("models/lib/inner.xml", kInner);
  const std::string m = error_of(
      [&] { (void)costate::sbml::read_string(outer("lib/inner.xml"), "outer.xml"); });
  EXPECT_NE(m.find("outer.xml:4: externalModelDefinition 'ext'"), std::string::npos) << m;
  EXPECT_NE(m.find("'./lib/inner.xml'"), std::string::npos) << m;
}

TEST_F(CompExternal, NonFileUrisAreRefused) {
  const std::string path = write("models/outer.xml", outer("http://example.org/inner.xml"));
  const std::string e = error_of([&] { (void)costate::sbml::read_file(path); });
  EXPECT_NE(e.find(path + ":4: externalModelDefinition 'ext'"), std::string::npos) << e;
  EXPECT_NE(e.find("from files only"), std::string::npos) << e;
}

// The suite's cases with comp:ExternalModelDefinition: each file either
// flattens (its sources exist next to it) or is refused naming the source
// that is missing — never another error.
TEST(CompExternalSuite, CasesFlattenOrNameTheMissingSource) {
  const fs::path cases = fs::path(COSTATE_SBML_SUITE_DIR) / "cases";
  if (!fs::is_directory(cases))
    GTEST_SKIP() << "no SBML Test Suite at " << cases << " (set COSTATE_SBML_SUITE_DIR)";
  int files = 0;
  for (const char* c : {"01165", "01167", "01471", "01473", "01475", "01477", "01778"}) {
    for (const char* v : {"l3v1", "l3v2"}) {
      const fs::path xml = cases / c / (std::string(c) + "-sbml-" + v + ".xml");
      if (!fs::exists(xml)) continue;
      ++files;
      std::ifstream in(xml);
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      const auto at = text.find("comp:source=\"");
      ASSERT_NE(at, std::string::npos) << xml << " has no external model definition";
      const std::string source =
          text.substr(at + 13, text.find('"', at + 13) - (at + 13));
      if (fs::exists(xml.parent_path() / source)) {
        EXPECT_NO_THROW((void)costate::sbml::read_file(xml.string())) << xml;
      } else {
        const std::string e = [&] {
          try {
            (void)costate::sbml::read_file(xml.string());
          } catch (const costate::Error& err) {
            return std::string(err.what());
          }
          return std::string("no error");
        }();
        EXPECT_NE(e.find(xml.string() + ":"), std::string::npos) << e;
        EXPECT_NE(e.find("(source '" + source + "'): the model file it names does not exist"),
                  std::string::npos)
            << e;
      }
    }
  }
  EXPECT_EQ(files, 14) << "the suite's seven external-definition cases, two files each";
}

}  // namespace
