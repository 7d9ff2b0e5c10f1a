// XML nesting bound before libsbml (issue 35, item 4): ~10 000 nested MathML
// elements crashed libsbml's reader (stack overflow); they are refused with
// the file, the line and the limit, and a real SBML model still loads.
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>

#include "costate/core/error.hpp"
#include "costate/io/xml_depth.hpp"
#include "costate/sbml/model.hpp"

namespace {

using costate::io::check_xml_nesting;

std::string error_of(const std::string& xml, const std::string& name = "model.xml") {
  try {
    check_xml_nesting(xml, name);
  } catch (const costate::Error& e) {
    return e.what();
  }
  return {};
}

/// A one-species SBML model whose rate law is `depth` nested MathML applies
/// of minus around k * S (an even depth keeps the sign).
std::string sbml_with_nested_math(int depth) {
  std::string math;
  for (int i = 0; i < depth; ++i) math += "<apply><minus/>";
  math += "<apply><times/><ci>k</ci><ci>S</ci></apply>";
  for (int i = 0; i < depth; ++i) math += "</apply>";
  return R"(<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="m">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="S" compartment="c" initialConcentration="1" hasOnlySubstanceUnits="false"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/></listOfParameters>
    <listOfReactions>
      <reaction id="r" reversible="false">
        <listOfReactants><speciesReference species="S" stoichiometry="1" constant="true"/></listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">)" +
         math + R"(</math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
)";
}

TEST(XmlDepth, CountsElementsNotCommentsCdataOrSelfClosingTags) {
  std::string xml = "<?xml version='1.0'?>\n<!-- <a><a><a> -->\n<r>";
  for (int i = 0; i < 999; ++i) xml += "<a x='>' y=\"<b>\"><e/><![CDATA[<c><c>]]>";
  for (int i = 0; i < 999; ++i) xml += "</a>";
  xml += "</r>";
  EXPECT_EQ(error_of(xml), "");  // 1000 levels: the limit, accepted
  const std::string deeper = "<z>\n" + xml + "</z>";
  const std::string msg = error_of(deeper);
  EXPECT_NE(msg.find("model.xml:4: XML elements nest deeper than 1000 levels"), std::string::npos)
      << msg;
}

TEST(XmlDepth, TenThousandNestedMathmlElementsAreRefusedBeforeLibsbml) {
  // On a 1 MiB stack, as an MPI rank or a Python thread may have.
  struct Job {
    std::string message;
  } job;
  auto body = [](void* p) -> void* {
    try {
      (void)costate::sbml::read_string(sbml_with_nested_math(10000), "deep.xml");
    } catch (const costate::Error& e) {
      static_cast<Job*>(p)->message = e.what();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 1024 * 1024), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, body, &job), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
  EXPECT_NE(job.message.find("deep.xml:"), std::string::npos) << job.message;
  EXPECT_NE(job.message.find("nest deeper than 1000 levels"), std::string::npos) << job.message;
}

TEST(XmlDepth, ModerateNestingStillLoads) {
  // 40 nested minus signs: far below the bound, the model loads.
  const costate::sbml::Model m = costate::sbml::read_string(sbml_with_nested_math(40), "ok.xml");
  EXPECT_EQ(m.state_names.size(), 1u);
}

}  // namespace
