#include "costate/sbml/model.hpp"
#include "costate/ode/event_order.hpp"

#include <sbml/SBMLTypes.h>
#include <sbml/conversion/ConversionProperties.h>
#include <sbml/packages/comp/common/CompExtensionTypes.h>
#include <sbml/xml/XMLNamespaces.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <optional>
#include <set>
#include <sstream>

#include "costate/core/error.hpp"
#include "costate/io/xml_depth.hpp"

// Debian builds libsbml without its C++ namespace (the classes are global);
// other builds put them in namespace libsbml. Name them libsbml:: either way.
#ifndef LIBSBML_USE_CPP_NAMESPACE
namespace libsbml {
using ::ASTNode;
using ::Compartment;
using ::Event;
using ::FunctionDefinition;
using ::InitialAssignment;
using ::KineticLaw;
using ::ListOf;
using ::Model;
using ::Parameter;
using ::Reaction;
using ::Rule;
using ::SBase;
using ::SBMLDocument;
using ::SBMLError;
using ::SBMLReader;
using ::ConversionProperties;
using ::XMLNamespaces;
using ::CompSBMLDocumentPlugin;
using ::ExternalModelDefinition;
using ::LIBSBML_OPERATION_SUCCESS;
using ::Species;
using ::SpeciesReference;
using ::SBML_formulaToL3String;
using ::LIBSBML_SEV_ERROR;
}  // namespace libsbml
#endif

namespace costate::sbml {

std::string to_string(StateKind kind) {
  switch (kind) {
    case StateKind::SpeciesConcentration: return "species (concentration)";
    case StateKind::SpeciesAmount: return "species (amount)";
    case StateKind::Parameter: return "parameter";
    case StateKind::Compartment: return "compartment";
    case StateKind::Mode: return "switching-function mode";
  }
  return "?";
}

namespace {

using expr::Node;
using expr::Op;

enum class Kind { Time, State, Parameter, Intermediate };

/// One SBML symbol (or t). Trees reference symbols by their index in
/// Importer::syms_ until the final renumbering.
struct Symbol {
  std::string id;
  std::string what;  ///< "species", "parameter", "compartment", "reaction", "local parameter"
  Kind kind = Kind::Parameter;
  StateKind state_kind = StateKind::Parameter;
  std::string compartment;  ///< species only
  bool hosu = false;        ///< species: hasOnlySubstanceUnits
  bool boundary = false;    ///< species: boundaryCondition
  bool by_reactions = false;  ///< a species state changed by reactions
  bool fast = false;  ///< a reaction with fast = true; a species a fast reaction changes
  bool assignment_rule = false;
  bool rate_rule = false;
  double number = 0.0;  ///< Parameter: its value
  Node value;           ///< Intermediate: its expression
  Node rhs;             ///< State: its time derivative
  Node initial;         ///< State: its initial value
  std::string where;    ///< what `value`/`rhs` came from, for messages
  const libsbml::SBase* element = nullptr;  ///< the element `where` names (its line in refusals)
  std::string text;     ///< the formula (libsbml's L3 infix), for messages
  std::vector<std::pair<Node, std::uint32_t>> terms;  ///< species: (signed ν, reaction symbol)
  std::string conversion_factor;  ///< species: its (or the model's) conversion factor id
  std::string rate_of;            ///< a rateOf(x) placeholder: x's id
  long delay = -1;  ///< a delay(x, d) slot (a parameter the history fills): its Importer::delays_ index
  /// A species in concentration in a compartment set by an assignment rule:
  /// its amount is the state (this symbol's index), C = A / V.
  long amount = -1;
  bool state_dependent = false;
  bool time_dependent = false;  ///< reads t (directly or through intermediates)
  /// A state determined by an algebraic rule (choose_algebraic_unknowns):
  /// `rhs` is the rule's residual 0 = g, `initial` a guess that the
  /// integrator's consistent initialisation replaces.
  bool algebraic = false;
  long index = -1;  ///< within its kind, after ordering
};

/// One SBML <event>, its math over Importer::syms_ (renumbered in assemble).
struct EventDef {
  std::string label;  ///< "event 'id'" or "event N", for messages
  std::string name;   ///< its id (or name)
  const libsbml::SBase* element = nullptr;  ///< the <event> (or what a switch comes from)
  Node trigger;
  std::string trigger_text;
  std::vector<std::pair<std::uint32_t, Node>> assign;  ///< (symbol, value)
  std::vector<std::string> assign_text;
  std::optional<Node> delay, priority;
  std::string priority_text;  ///< the priority's formula ("" when unset)
  bool initial_value = true, persistent = true, use_values_from_trigger_time = true;
};

/// Each distinct delay(x, d) of the math: a parameter slot (Symbol::delay)
/// that ode::DelayedInputs fills with x(t − d) from the history.
struct DelayDef {
  std::uint32_t slot = 0;
  Node x, d;
  std::string where, text;
  const libsbml::SBase* element = nullptr;
};

std::string formula(const libsbml::ASTNode* a) {
  if (!a) return "";
  char* s = libsbml::SBML_formulaToL3String(a);
  std::string out = s ? s : "";
  std::free(s);
  return out;
}

Node add(Node a, Node b) { return Node::apply(Op::Add, {std::move(a), std::move(b)}); }
Node mul(Node a, Node b) { return Node::apply(Op::Mul, {std::move(a), std::move(b)}); }
Node div(Node a, Node b) { return Node::apply(Op::Div, {std::move(a), std::move(b)}); }
Node sub(Node a, Node b) { return Node::apply(Op::Sub, {std::move(a), std::move(b)}); }

void collect_variables(const Node& n, std::set<std::uint32_t>& out) {
  if (n.kind == Node::Kind::Variable) out.insert(n.variable);
  for (const Node& a : n.args) collect_variables(a, out);
}

class Importer {
 public:
  /// `base` is the folder external model definitions (comp) are read from.
  Importer(std::string file, std::string base, const ReadOptions& options = {})
      : file_(std::move(file)), base_(std::move(base)),
        ignored_initial_assignments_(options.ignore_initial_assignments.begin(),
                                     options.ignore_initial_assignments.end()) {}

  Model run(libsbml::SBMLDocument& doc) {
    check_read_errors(doc);
    resolve_packages(doc);
    m_ = doc.getModel();
    if (!m_) throw Error(file_ + ": the SBML document has no <model>");
    refuse_unsupported();
    collect_rules();
    collect_event_targets();
    choose_algebraic_unknowns();
    register_symbols();
    define_symbols();
    define_events();
    sbml_events_ = !events_.empty();
    hold_initial_assignments();
    resolve_rates();
    order_intermediates();
    switch_state_relations();
    check_event_triggers();
    check_discontinuities();
    return assemble();
  }

 private:
  /// Throws costate::Error "file:line: element: problem", the line of `at`
  /// (else of the element being read, at_) when libsbml knows it.
  [[noreturn]] void refuse(const std::string& element, const std::string& problem,
                           const libsbml::SBase* at = nullptr) const {
    const libsbml::SBase* where = at ? at : at_;
    std::string head = file_;
    if (where && where->getLine() > 0) head += ":" + std::to_string(where->getLine());
    throw Error(head + ": " + element + ": " + problem);
  }

  /// "file:line" of an element (the file alone when libsbml has no line):
  /// the head of messages raised beyond this importer (expr, ode).
  std::string located(const libsbml::SBase* e) const {
    return e && e->getLine() > 0 ? file_ + ":" + std::to_string(e->getLine()) : file_;
  }

  /// While it lives, refusals without an element of their own name the line
  /// of `e` (restores the previous one after).
  class Reading {
   public:
    Reading(const Importer& importer, const libsbml::SBase* e)
        : importer_(importer), saved_(importer.at_) {
      importer_.at_ = e;
    }
    ~Reading() { importer_.at_ = saved_; }
    Reading(const Reading&) = delete;
    Reading& operator=(const Reading&) = delete;

   private:
    const Importer& importer_;
    const libsbml::SBase* saved_;
  };

  void check_read_errors(libsbml::SBMLDocument& doc) const {
    std::string messages;
    int shown = 0;
    for (unsigned i = 0; i < doc.getNumErrors(); ++i) {
      const libsbml::SBMLError* e = doc.getError(i);
      if (e->getSeverity() < libsbml::LIBSBML_SEV_ERROR) continue;
      if (shown++ < 5)
        messages += "\n  line " + std::to_string(e->getLine()) + ", column " +
                    std::to_string(e->getColumn()) + ": " + e->getMessage();
    }
    if (shown)
      throw Error(file_ + ": libsbml cannot read the document (" + std::to_string(shown) +
                  " error" + (shown == 1 ? "" : "s") + "):" + messages);
  }

  /// SBML Level 3 packages: `comp` is flattened into one model (libsbml's
  /// CompFlatteningConverter: submodels, ports, deletions, replacements);
  /// any other package the document marks required is refused by name (its
  /// constructs would change the math). Packages marked not required do not
  /// change the math (SBML L3 core, section 4.1.3) and are ignored.
  void resolve_packages(libsbml::SBMLDocument& doc) {
    const libsbml::XMLNamespaces* ns = doc.getNamespaces();
    bool comp = false;
    for (int i = 0; ns && i < ns->getNumNamespaces(); ++i) {
      const std::string uri = ns->getURI(i), prefix = ns->getPrefix(i);
      if (prefix.empty() || uri.find("sbml.org/sbml/level3/") == std::string::npos) continue;
      if (prefix == "comp" || uri.find("/comp/") != std::string::npos) {
        comp = true;
        continue;
      }
      if (doc.getPackageRequired(uri))
        refuse("package '" + prefix + "' (" + uri + ")",
               "the document marks it required and costate does not implement it", &doc);
    }
    if (!comp) return;
    check_external_sources(doc);
    libsbml::ConversionProperties props;
    props.addOption("flatten comp", true);
    props.addOption("basePath", base_);
    props.addOption("performValidation", false);
    props.addOption("abortIfUnflattenable", std::string("requiredOnly"));
    if (doc.convert(props) != libsbml::LIBSBML_OPERATION_SUCCESS) {
      std::string messages;
      for (unsigned i = 0, shown = 0; i < doc.getNumErrors() && shown < 5; ++i) {
        const libsbml::SBMLError* e = doc.getError(i);
        if (e->getSeverity() < libsbml::LIBSBML_SEV_ERROR) continue;
        messages += "\n  line " + std::to_string(e->getLine()) + ": " + e->getMessage();
        ++shown;
      }
      refuse("package 'comp'", "libsbml's CompFlatteningConverter could not flatten the "
                               "hierarchical model" + (messages.empty() ? std::string(".") : ":" + messages),
             &doc);
    }
  }

  /// comp externalModelDefinitions: each `source` (a path relative to the
  /// document's folder, an absolute path or a file: URI) must name a file
  /// that exists — else a refusal naming the definition, its source and
  /// where it was looked for (libsbml's converter would only say it could
  /// not resolve it). Other URI schemes (http:…) are refused: costate reads
  /// models from files only. Each source is then set to the file found.
  void check_external_sources(libsbml::SBMLDocument& doc) const {
    auto* plugin = dynamic_cast<libsbml::CompSBMLDocumentPlugin*>(doc.getPlugin("comp"));
    if (!plugin) return;
    for (unsigned i = 0; i < plugin->getNumExternalModelDefinitions(); ++i) {
      libsbml::ExternalModelDefinition* e = plugin->getExternalModelDefinition(i);
      const std::string label = "externalModelDefinition '" + e->getId() + "' (source '" +
                                e->getSource() + "')";
      std::string source = e->getSource();
      if (source.rfind("file://", 0) == 0)
        source.erase(0, 7);
      else if (source.rfind("file:", 0) == 0)
        source.erase(0, 5);
      else if (const auto colon = source.find(':');
               colon != std::string::npos && colon > 1 && source.find('/') > colon)
        refuse(label, "costate reads external model definitions from files only, not from '" +
                          source.substr(0, colon) + ":' URIs",
               e);
      if (source.empty()) refuse(label, "the source is empty; expected the model file's path", e);
      const std::filesystem::path where = std::filesystem::path(source).is_absolute()
                                              ? std::filesystem::path(source)
                                              : std::filesystem::path(base_) / source;
      std::error_code ec;
      if (!std::filesystem::is_regular_file(where, ec))
        refuse(label, "the model file it names does not exist (looked for '" + where.string() +
                          "'); the comp package's external model definitions are read from "
                          "files next to the document",
               e);
      // The converter reads the file we checked (libsbml's own resolver
      // does not take file: URIs).
      e->setSource(where.string());
    }
  }

  void refuse_unsupported() const {
    if (m_->getNumConstraints() > 0)
      refuse("constraint 1 of " + std::to_string(m_->getNumConstraints()) + " ('" +
                 formula(m_->getConstraint(0)->getMath()) + "')",
             "constraints are not supported", m_->getConstraint(0));
  }

  void collect_rules() {
    for (unsigned i = 0; i < m_->getNumRules(); ++i) {
      const libsbml::Rule* r = m_->getRule(i);
      Reading here(*this, r);
      if (!r->isSetMath()) continue;  // Level 3 Version 2: a rule without math is ignored
      if (r->isAlgebraic()) {
        algebraic_rules_.emplace_back(i, r);
        continue;
      }
      const std::string kind = r->isAssignment() ? "assignment rule" : "rate rule";
      const std::string& v = r->getVariable();
      if (assignment_.count(v) || rate_.count(v))
        refuse(kind + " " + std::to_string(i + 1) + " (variable '" + v + "')",
               std::string("the variable already has ") +
                   (assignment_.count(v) ? "an assignment rule" : "a rate rule") +
                   "; a symbol may be set by one rule only (invalid SBML)");
      (r->isAssignment() ? assignment_ : rate_)[v] = r;
    }
    for (unsigned i = 0; i < m_->getNumInitialAssignments(); ++i) {
      const libsbml::InitialAssignment* a = m_->getInitialAssignment(i);
      Reading here(*this, a);
      if (!a->isSetMath()) continue;  // Level 3 Version 2: ignored without math
      // A parameter or compartment the caller sets (ReadOptions); a
      // species keeps its assignment (the caller overrides its initial state).
      if (ignored_initial_assignments_.count(a->getSymbol()) &&
          (m_->getParameter(a->getSymbol()) || m_->getCompartment(a->getSymbol())))
        continue;
      if (!initial_assignment_.emplace(a->getSymbol(), a).second)
        refuse("initial assignment " + std::to_string(i + 1) + " (symbol '" + a->getSymbol() + "')",
               "the symbol already has an initial assignment; one per symbol (invalid SBML)");
      if (assignment_.count(a->getSymbol()))
        refuse("initial assignment " + std::to_string(i + 1) + " (symbol '" + a->getSymbol() + "')",
               "the symbol also has an assignment rule; SBML allows one or the other");
    }
    for (unsigned i = 0; i < m_->getNumFunctionDefinitions(); ++i) {
      const libsbml::FunctionDefinition* f = m_->getFunctionDefinition(i);
      functions_[f->getId()] = f;
    }
  }

  /// A species reference's stated stoichiometry (Level 1: over its
  /// denominator; Level 3 without the attribute: 1).
  double stoichiometry_of(const libsbml::SpeciesReference* sr) const {
    double nu = sr->isSetStoichiometry() || m_->getLevel() < 3 ? sr->getStoichiometry() : 1.0;
    if (m_->getLevel() == 1) nu /= sr->getDenominator();
    return nu;
  }

  /// Level 1's default volume is 1; a 0-D compartment has no size, and its
  /// species' math is their amount: 1 makes the conversions the identity.
  bool has_size(const libsbml::Compartment* c) const {
    return c->isSetSize() || m_->getLevel() == 1 || c->getSpatialDimensions() == 0;
  }
  double compartment_size(const libsbml::Compartment* c) const {
    return c->isSetSize() ? c->getSize() : has_size(c) ? 1.0 : 0.0;
  }

  std::uint32_t add_symbol(Symbol s) {
    if (s.id == "t")
      refuse(s.what + " 't'", "the id 't' is costate's name for time; rename it in the SBML file");
    const auto index = static_cast<std::uint32_t>(syms_.size());
    if (!by_id_.emplace(s.id, index).second)
      refuse(s.what + " '" + s.id + "'", "the id is used twice");
    syms_.push_back(std::move(s));
    return index;
  }

  /// Pass 1: every symbol with its kind, so that math may refer to any.
  void register_symbols() {
    Symbol time;
    time.id = "t";
    time.what = "time";
    time.kind = Kind::Time;
    syms_.push_back(time);  // symbol 0; by_id_ has no "t": math uses the csymbol
    auto classify = [&](Symbol& s, double value, bool value_set) {
      s.assignment_rule = assignment_.count(s.id) > 0;
      s.rate_rule = rate_.count(s.id) > 0;
      if (algebraic_.count(s.id)) {
        // Its stated value (else 1, a size that keeps amount ↔ concentration
        // conversions finite) is a guess the integrator makes consistent at t0.
        s.kind = Kind::State;
        s.algebraic = true;
        s.number = value_set ? value : 1.0;
      } else if (s.assignment_rule) {
        s.kind = Kind::Intermediate;
      } else if (s.rate_rule) {
        if (!value_set && !initial_assignment_.count(s.id))
          refuse(s.what + " '" + s.id + "'",
                 "has a rate rule but no initial value (give it one or an initial assignment)");
        s.kind = Kind::State;
      } else if (event_target_.count(s.id)) {
        // Changed by an event only: a state with a zero derivative.
        if (!value_set && !initial_assignment_.count(s.id))
          refuse(s.what + " '" + s.id + "'",
                 "is assigned by " + event_target_.at(s.id) +
                     " but has no initial value (give it one or an initial assignment)");
        s.kind = Kind::State;
      } else if (initial_assignment_.count(s.id)) {
        s.kind = Kind::Intermediate;  // constant in time: an expression of the parameters
      } else {
        // An id whose initial assignment the caller overrides (ReadOptions)
        // may lack a value: the caller gives it one.
        if (!value_set && !ignored_initial_assignments_.count(s.id))
          refuse(s.what + " '" + s.id + "'",
                 "has no value (give it one, or an initial assignment or a rule)");
        s.kind = Kind::Parameter;
        s.number = value;
      }
    };
    for (unsigned i = 0; i < m_->getNumCompartments(); ++i) {
      const libsbml::Compartment* c = m_->getCompartment(i);
      Reading here(*this, c);
      Symbol s;
      s.id = c->getId();
      s.element = c;
      s.what = "compartment";
      s.state_kind = StateKind::Compartment;
      classify(s, compartment_size(c), has_size(c));
      add_symbol(std::move(s));
    }
    for (unsigned i = 0; i < m_->getNumSpecies(); ++i) {
      const libsbml::Species* sp = m_->getSpecies(i);
      Reading here(*this, sp);
      Symbol s;
      s.id = sp->getId();
      s.element = sp;
      s.what = "species";
      s.compartment = sp->getCompartment();
      s.hosu = sp->getHasOnlySubstanceUnits();
      s.boundary = sp->getBoundaryCondition();
      s.state_kind = s.hosu ? StateKind::SpeciesAmount : StateKind::SpeciesConcentration;
      if (sp->isSetConversionFactor()) s.conversion_factor = sp->getConversionFactor();
      else if (m_->isSetConversionFactor()) s.conversion_factor = m_->getConversionFactor();
      if (auto c = by_id_.find(s.compartment); c == by_id_.end())
        refuse("species '" + s.id + "'", "its compartment '" + s.compartment + "' does not exist");
      else if (syms_[c->second].state_kind != StateKind::Compartment)
        refuse("species '" + s.id + "'", "its compartment attribute '" + s.compartment +
                                             "' names a " + syms_[c->second].what +
                                             ", not a compartment");
      s.assignment_rule = assignment_.count(s.id) > 0;
      s.rate_rule = rate_.count(s.id) > 0;
      s.algebraic = algebraic_.count(s.id) > 0;
      if (const auto ev = event_target_.find(s.id); ev != event_target_.end()) {
        if (sp->getConstant())
          refuse("species '" + s.id + "'",
                 "is constant but assigned by " + ev->second + " (invalid SBML)");
        if (!s.hosu && !s.assignment_rule && !s.rate_rule &&
            (assignment_.count(s.compartment) || algebraic_.count(s.compartment)))
          refuse("species '" + s.id + "'",
                 "is assigned by " + ev->second + " and is in concentration in compartment '" +
                     s.compartment + "' whose size is set by an " +
                     (algebraic_.count(s.compartment) ? "algebraic" : "assignment") +
                     " rule; not supported");
      }
      if (s.algebraic) {
        s.kind = Kind::State;  // its value as its math uses it, from its algebraic rule
      } else if (s.assignment_rule) {
        s.kind = Kind::Intermediate;
      } else if (s.rate_rule) {
        s.kind = Kind::State;
      } else if (sp->getConstant() && !s.hosu && rate_.count(s.compartment)) {
        // Its amount is constant; its concentration dilutes as the
        // compartment changes: a state, dC/dt = −C V'/V (define()).
        s.kind = Kind::State;
      } else if (sp->getConstant()) {
        // Constant in time: a parameter when its stated value is in the
        // species' math units, else an expression (the converted value).
        const bool direct = !initial_assignment_.count(s.id) &&
                            ((s.hosu && sp->isSetInitialAmount()) ||
                             (!s.hosu && sp->isSetInitialConcentration()));
        if (direct) {
          s.kind = Kind::Parameter;
          s.number = s.hosu ? sp->getInitialAmount() : sp->getInitialConcentration();
        } else {
          s.kind = Kind::Intermediate;
        }
      } else {
        s.kind = Kind::State;
        s.by_reactions = !s.boundary;
      }
      if (!s.hosu && !s.assignment_rule && !s.rate_rule && !s.algebraic &&
          (assignment_.count(s.compartment) || algebraic_.count(s.compartment))) {
        // V(t) has no derivative to dilute with (set by an assignment or an
        // algebraic rule): the amount is the state (a symbol added below)
        // and the concentration an intermediate.
        s.kind = Kind::Intermediate;
        s.by_reactions = !s.boundary;
        amount_held_.push_back(add_symbol(std::move(s)));
        continue;
      }
      add_symbol(std::move(s));
    }
    for (unsigned i = 0; i < m_->getNumParameters(); ++i) {
      const libsbml::Parameter* p = m_->getParameter(i);
      Reading here(*this, p);
      Symbol s;
      s.id = p->getId();
      s.element = p;
      s.what = "parameter";
      s.state_kind = StateKind::Parameter;
      classify(s, p->getValue(), p->isSetValue());
      add_symbol(std::move(s));
    }
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      Reading here(*this, r);
      Symbol s;
      s.id = r->getId();
      s.element = r;
      s.what = "reaction";
      s.kind = Kind::Intermediate;
      s.fast = r->isSetFast() && r->getFast();  // reduce_fast_reactions
      if (!r->isSetKineticLaw() || !r->getKineticLaw()->isSetMath())
        refuse("reaction '" + s.id + "'", "has no kinetic law (costate needs its rate)");
      add_symbol(std::move(s));
    }
    // Species references with an id: their stoichiometry is a symbol (a
    // value in math, possibly set by an initial assignment or a rule).
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      for (const auto* list : {r->getListOfReactants(), r->getListOfProducts()})
        for (unsigned k = 0; k < list->size(); ++k) {
          const auto* sr = static_cast<const libsbml::SpeciesReference*>(list->get(k));
          if (!sr->isSetId()) continue;
          Reading here(*this, sr);
          Symbol ref;
          ref.id = sr->getId();
          ref.element = sr;
          ref.what = "species reference";
          classify(ref, stoichiometry_of(sr), true);
          add_symbol(std::move(ref));
        }
    }
    // Local parameters: global parameters "<reaction>_<local>".
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      const libsbml::KineticLaw* kl = r->getKineticLaw();
      for (unsigned k = 0; k < kl->getNumParameters(); ++k) {
        const libsbml::Parameter* lp = kl->getParameter(k);
        Reading here(*this, lp);
        std::string name = r->getId() + "_" + lp->getId();
        while (by_id_.count(name) || name == "t") name += "_";
        if (!lp->isSetValue())
          refuse("local parameter '" + lp->getId() + "' of reaction '" + r->getId() + "'",
                 "has no value");
        Symbol s;
        s.id = name;
        s.what = "local parameter";
        s.element = lp;
        s.kind = Kind::Parameter;
        s.number = lp->getValue();
        local_[r->getId()][lp->getId()] = add_symbol(std::move(s));
      }
    }
    // The amounts of species in compartments set by assignment rules:
    // states named "<species id>_amount" (underscores appended until unique).
    for (std::uint32_t i : amount_held_) {
      Symbol a;
      a.id = syms_[i].id + "_amount";
      while (by_id_.count(a.id)) a.id += "_";
      a.what = "species";
      a.kind = Kind::State;
      a.state_kind = StateKind::SpeciesAmount;
      a.compartment = syms_[i].compartment;
      a.hosu = true;
      a.rhs = Node::constant(0.0);
      a.where = "amount of species '" + syms_[i].id + "'";
      a.element = syms_[i].element;
      syms_[i].amount = add_symbol(std::move(a));
    }
    // What rules and initial assignments set must be a compartment, species
    // or parameter (a speciesReference's stoichiometry is refused later by
    // name); anything else would be dropped silently.
    auto check_target = [&](const std::string& element, const std::string& id,
                            const libsbml::SBase* at) {
      Reading here(*this, at);
      const auto it = by_id_.find(id);
      if (it == by_id_.end())
        refuse(element + " (variable '" + id + "')",
               "no compartment, species, parameter or speciesReference has this id");
      const Symbol& target = syms_[it->second];
      if (target.what != "compartment" && target.what != "species" &&
          target.what != "parameter" && target.what != "species reference")
        refuse(element + " (variable '" + id + "')",
               "'" + id + "' is a " + target.what +
                   "; rules and initial assignments set compartments, species, parameters "
                   "and species references");
    };
    for (const auto& [id, r] : assignment_) check_target("assignment rule", id, r);
    for (const auto& [id, r] : rate_) check_target("rate rule", id, r);
    for (const auto& [id, a] : initial_assignment_) check_target("initial assignment", id, a);
    for (const auto& [id, event] : event_target_) {
      check_target("event assignment of " + event, id, event_assignment_.at(id));
      const Symbol& target = syms_[by_id_.at(id)];
      if (target.assignment_rule)
        refuse("event assignment of " + event + " (variable '" + id + "')",
               "the variable is set by an assignment rule; an event may not assign it (invalid "
               "SBML)", event_assignment_.at(id));
      // A species reference an event assigns is a state with a zero
      // derivative (classify), which the reactions' terms read.
    }
  }

  /// The symbol an SBML element refers to: `element` and `attribute` name
  /// the reference in the message (no std::out_of_range escapes).
  std::uint32_t index_of(const std::string& id, const std::string& element,
                         const std::string& attribute) const {
    const auto it = by_id_.find(id);
    if (it == by_id_.end())
      refuse(element, "its " + attribute + " '" + id +
                          "' is not the id of a compartment, species, parameter or reaction");
    return it->second;
  }

  Symbol& sym(const std::string& id, const std::string& element) {
    return syms_[index_of(id, element, "id")];
  }

  /// Pass 2: the math of every symbol.
  void define_symbols() {
    for (unsigned i = 0; i < m_->getNumCompartments(); ++i) {
      const libsbml::Compartment* c = m_->getCompartment(i);
      Reading here(*this, c);
      define(sym(c->getId(), "compartment " + std::to_string(i + 1)),
             Node::constant(compartment_size(c)));
    }
    for (unsigned i = 0; i < m_->getNumSpecies(); ++i) {
      const libsbml::Species* sp = m_->getSpecies(i);
      Reading here(*this, sp);
      Symbol& s = sym(sp->getId(), "species " + std::to_string(i + 1));
      const Node V = Node::var(index_of(s.compartment, "species '" + s.id + "'", "compartment"));
      Node stated;
      if (sp->isSetInitialConcentration()) {
        stated = Node::constant(sp->getInitialConcentration());
        if (s.hosu) stated = mul(std::move(stated), V);
      } else if (sp->isSetInitialAmount()) {
        stated = Node::constant(sp->getInitialAmount());
        if (!s.hosu) stated = div(std::move(stated), V);
      } else if (s.algebraic) {
        stated = Node::constant(1.0);  // a guess: the algebraic rule determines it
      } else if (!initial_assignment_.count(s.id) && !s.assignment_rule) {
        refuse("species '" + s.id + "'",
               "has no initial value (initialConcentration, initialAmount or an initial assignment)");
      }
      if (s.amount >= 0) {  // C = A / V, A(t0) = C(t0) V(t0)
        Symbol& a = syms_[static_cast<std::size_t>(s.amount)];
        if (auto ia = initial_assignment_.find(s.id); ia != initial_assignment_.end())
          stated = convert(ia->second->getMath(), "initial assignment for species '" + s.id + "'");
        a.initial = mul(std::move(stated), V);
        s.value = div(Node::var(static_cast<std::uint32_t>(s.amount)), V);
        s.where = "concentration of species '" + s.id + "' (its amount over its compartment)";
        continue;
      }
      define(s, std::move(stated));
    }
    for (unsigned i = 0; i < m_->getNumParameters(); ++i) {
      const libsbml::Parameter* p = m_->getParameter(i);
      Reading here(*this, p);
      define(sym(p->getId(), "parameter " + std::to_string(i + 1)), Node::constant(p->getValue()));
    }
    for (unsigned i = 0; i < m_->getNumReactions(); ++i)
      for (const auto* list : {m_->getReaction(i)->getListOfReactants(),
                               m_->getReaction(i)->getListOfProducts()})
        for (unsigned k = 0; k < list->size(); ++k) {
          const auto* sr = static_cast<const libsbml::SpeciesReference*>(list->get(k));
          Reading here(*this, sr);
          if (sr->isSetId())
            define(sym(sr->getId(), "species reference"), Node::constant(stoichiometry_of(sr)));
        }
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      Reading here(*this, r);
      const std::uint32_t self = index_of(r->getId(), "reaction " + std::to_string(i + 1), "id");
      const std::string where = "kinetic law of reaction '" + r->getId() + "'";
      const libsbml::KineticLaw* kl = r->getKineticLaw();
      const auto local = local_.find(r->getId());
      locals_ = local != local_.end() ? &local->second : nullptr;
      Node rate = [&] {
        Reading law(*this, kl);
        return convert(kl->getMath(), where);
      }();
      locals_ = nullptr;
      syms_[self].value = std::move(rate);
      syms_[self].where = where;
      syms_[self].element = kl;
      syms_[self].text = formula(kl->getMath());
      auto stoichiometry = [&](const libsbml::ListOf* list, double sign) {
        for (unsigned k = 0; k < list->size(); ++k) {
          const auto* sr = static_cast<const libsbml::SpeciesReference*>(list->get(k));
          Reading here(*this, sr);
          const std::string element = "species reference to '" + sr->getSpecies() +
                                      "' in reaction '" + r->getId() + "'";
          // ν: stoichiometryMath (Level 2), the reference's own symbol
          // (its id: constant, or set by an initial assignment or a rule),
          // else the stated number.
          Node nu;
          if (sr->isSetStoichiometryMath()) {
            if (!sr->getStoichiometryMath()->isSetMath())
              refuse(element, "its stoichiometryMath has no math");
            nu = convert(sr->getStoichiometryMath()->getMath(), "stoichiometryMath of the " + element);
          } else if (sr->isSetId()) {
            nu = Node::var(index_of(sr->getId(), element, "id"));
          } else {
            nu = Node::constant(stoichiometry_of(sr));
          }
          if (sign < 0) {
            nu = nu.kind == Node::Kind::Constant ? Node::constant(-nu.value)
                                                 : Node::apply(Op::Neg, {std::move(nu)});
          }
          if (!by_id_.count(sr->getSpecies()))
            refuse(element, "the species does not exist");
          Symbol& s = sym(sr->getSpecies(), element);
          if (s.boundary) continue;  // boundary species are not changed by reactions
          if (!s.by_reactions)
            refuse("species '" + s.id + "'",
                   std::string("is changed by reaction '") + r->getId() + "' but is " +
                       (s.assignment_rule ? "set by an assignment rule"
                                          : s.rate_rule ? "set by a rate rule" : "constant") +
                       " and not a boundary species (invalid SBML)");
          bool merged = false;
          for (auto& term : s.terms)
            if (term.second == self) {
              term.first = term.first.kind == Node::Kind::Constant && nu.kind == Node::Kind::Constant
                               ? Node::constant(term.first.value + nu.value)
                               : add(std::move(term.first), nu);
              merged = true;
            }
          if (!merged) s.terms.emplace_back(std::move(nu), self);
        }
      };
      stoichiometry(r->getListOfReactants(), -1.0);
      stoichiometry(r->getListOfProducts(), 1.0);
    }
    reduce_fast_reactions();
    // Species changed by reactions: dC/dt = (Σ ν v) / V [− C V'/V].
    for (Symbol& s : syms_) {
      if (!s.by_reactions) continue;
      Node sum = reaction_sum(s);
      s.where = "reactions changing species '" + s.id + "'";
      if (!s.conversion_factor.empty())  // dA/dt = f Σ ν v
        sum = mul(Node::var(index_of(s.conversion_factor, "species '" + s.id + "'",
                                     "conversionFactor")),
                  std::move(sum));
      if (s.amount >= 0) {  // the amount's equation
        syms_[static_cast<std::size_t>(s.amount)].rhs = std::move(sum);
        continue;
      }
      if (!s.hosu) {
        const std::uint32_t c = index_of(s.compartment, "species '" + s.id + "'", "compartment");
        const Symbol& comp = syms_[c];
        if (comp.assignment_rule)
          refuse("species '" + s.id + "'",
                 "is in concentration (hasOnlySubstanceUnits = false) in compartment '" + comp.id +
                     "' whose size is set by an assignment rule; not supported (give the "
                     "compartment a rate rule, or the species hasOnlySubstanceUnits = true)",
                 s.element);
        sum = div(std::move(sum), Node::var(c));
        if (comp.kind == Kind::State)
          sum = sub(std::move(sum),
                    div(mul(Node::var(index_of(s.id, "species '" + s.id + "'", "id")), comp.rhs),
                        Node::var(c)));
      }
      s.rhs = std::move(sum);
    }
  }

  /// Σ ν v over the reactions changing species `s` (an amount per time),
  /// fast reactions left out when `slow_only`.
  Node reaction_sum(const Symbol& s, bool slow_only = false) const {
    Node sum = Node::constant(0.0);
    bool first = true;
    for (const auto& [nu, reaction] : s.terms) {
      if (slow_only && syms_[reaction].fast) continue;
      Node term = Node::var(reaction);
      if (nu.kind != Node::Kind::Constant) {
        term = mul(nu, std::move(term));
      } else if (nu.value == 0.0) {
        continue;
      } else if (nu.value == -1.0) {
        term = Node::apply(Op::Neg, {std::move(term)});
      } else if (nu.value != 1.0) {
        term = mul(nu, std::move(term));
      }
      sum = first ? std::move(term) : add(std::move(sum), std::move(term));
      first = false;
    }
    return sum;
  }

  /// Fast reactions (SBML Level 2 and Level 3 Version 1: fast="true") are
  /// at equilibrium on the slow reactions' time scale: their kinetic laws
  /// are 0 and the fast subsystem's conservation laws hold. With a the
  /// amounts of the species the r fast reactions change, N_f their
  /// stoichiometry (columns independent) and N_s v_s the slow reactions'
  /// rates: r pivot species P (N_f[P] regular, partial pivoting) become
  /// algebraic states, residuals v_k(…) = 0 for the fast reactions k; each
  /// other species j is given by the conserved amount
  ///     T_j = a_j − Σ_{i∈P} M_ji a_i,   M = N_f[non-P] N_f[P]⁻¹,
  /// a state "<id>_total" with dT_j/dt = (N_s v_s)_j − Σ_i M_ji (N_s v_s)_i
  /// (the fast fluxes cancel), T_j(t0) from the stated values, and
  /// a_j = T_j + Σ_i M_ji a_i. At t0 the consistent initialisation then
  /// equilibrates the fast reactions keeping the T_j, as SBML says (fast
  /// reactions act at t = 0). A species' conversion factor f scales its
  /// row (da/dt = f N v). With one fast reaction the stoichiometries may be
  /// expressions constant in time (species references, conversion
  /// factors): M_j = N_j / N_p as trees. Refused by name: stoichiometries
  /// that change in time, non-numeric ones with several fast reactions,
  /// linearly dependent fast reactions, species an event assigns, and
  /// species in concentration whose compartment changes in time.
  void reduce_fast_reactions() {
    std::vector<std::uint32_t> fast, species;
    for (std::uint32_t i = 0; i < syms_.size(); ++i)
      if (syms_[i].what == "reaction" && syms_[i].fast) fast.push_back(i);
    if (fast.empty()) return;
    for (std::uint32_t i = 0; i < syms_.size(); ++i) {
      const Symbol& s = syms_[i];
      if (!s.by_reactions) continue;
      for (const auto& term : s.terms)
        if (syms_[term.second].fast) {
          species.push_back(i);
          break;
        }
    }
    const std::size_t nf = fast.size(), ns = species.size();
    // Whether a stoichiometry (or conversion factor) is constant in time:
    // numbers, parameters, and values that depend on neither t nor a state.
    std::function<bool(const Node&)> constant_in_time = [&](const Node& n) {
      if (n.kind == Node::Kind::Variable) {
        const Symbol& v = syms_[n.variable];
        if (v.kind == Kind::Parameter) return true;
        if (v.kind != Kind::Intermediate || v.what == "reaction" || v.fast) return false;
        return constant_in_time(v.value);
      }
      for (const Node& a : n.args)
        if (!constant_in_time(a)) return false;
      return true;
    };
    // N_f (amount per fast flux), row-major ns × nf: numbers, or for one
    // fast reaction trees constant in time (a species reference's
    // stoichiometry, a conversion factor).
    std::vector<Node> N(ns * nf, Node::constant(0.0));
    std::vector<Node> factor(ns);  // the conversion factor (a constant 1 without one)
    bool numeric = true;
    for (std::size_t a = 0; a < ns; ++a) {
      Symbol& s = syms_[species[a]];
      Reading here(*this, s.element);
      const std::string label = "species '" + s.id + "'";
      const std::string why = " (a fast reaction changes it); not supported";
      factor[a] = Node::constant(1.0);
      if (!s.conversion_factor.empty())
        factor[a] = Node::var(index_of(s.conversion_factor, label, "conversionFactor"));
      if (s.amount >= 0)
        refuse(label, "is in concentration in compartment '" + s.compartment +
                          "', whose size an assignment or algebraic rule sets" + why);
      if (event_target_.count(s.id))
        refuse(label, "is assigned by " + event_target_.at(s.id) + why);
      if (!s.hosu) {
        const Symbol& c = syms_[index_of(s.compartment, label, "compartment")];
        if (c.kind == Kind::State || c.assignment_rule)
          refuse(label, "is in concentration in compartment '" + c.id +
                            "', whose size changes in time" + why);
      }
      for (const auto& [nu, reaction] : s.terms) {
        if (!syms_[reaction].fast) continue;
        const std::size_t k = static_cast<std::size_t>(
            std::find(fast.begin(), fast.end(), reaction) - fast.begin());
        Node entry = factor[a].kind == Node::Kind::Constant ? nu : mul(factor[a], nu);
        if (!constant_in_time(entry))
          refuse(label, "its stoichiometry in fast reaction '" + syms_[reaction].id +
                            "' (or its conversion factor) changes in time; not supported");
        Node& cell = N[a * nf + k];
        cell = cell.kind == Node::Kind::Constant && entry.kind == Node::Kind::Constant
                   ? Node::constant(cell.value + entry.value)
                   : add(std::move(cell), std::move(entry));
        numeric = numeric && cell.kind == Node::Kind::Constant;
      }
    }
    if (!numeric && nf > 1)
      refuse("reaction '" + syms_[fast[0]].id + "'",
             "is one of " + std::to_string(nf) + " fast reactions whose stoichiometries are not "
             "all numbers (species references or conversion factors); with several fast "
             "reactions only numbers are supported", syms_[fast[0]].element);
    // Stoichiometries are small integers: a pivot below this is a
    // combination of the others, not a number.
    constexpr double kDependent = 1e-9;
    std::vector<std::size_t> pivot_row(nf);
    std::vector<char> is_pivot(ns, 0);
    // M[a] (nf entries, column k ↔ pivot k) for each non-pivot species a.
    std::vector<std::vector<Node>> M(ns);
    if (!numeric) {
      // One fast reaction: the pivot is a species with a number (the
      // largest), else the first; M_a = N_a / N_p.
      std::size_t best = ns;
      for (std::size_t a = 0; a < ns; ++a) {
        const Node& c = N[a];
        if (c.kind != Node::Kind::Constant) {
          if (best == ns) best = a;
        } else if (std::abs(c.value) > kDependent &&
                   (best == ns || N[best].kind != Node::Kind::Constant ||
                    std::abs(c.value) > std::abs(N[best].value))) {
          best = a;
        }
      }
      pivot_row[0] = best;
      is_pivot[best] = 1;
      for (std::size_t a = 0; a < ns; ++a)
        if (!is_pivot[a]) M[a] = {div(N[a], N[best])};
    } else {
      std::vector<double> E(ns * nf);
      for (std::size_t q = 0; q < ns * nf; ++q) E[q] = N[q].value;
      const std::vector<double> Nd = E;
      // Pivots: Gaussian elimination with partial pivoting.
      for (std::size_t k = 0; k < nf; ++k) {
        std::size_t best = ns;
        double best_abs = 0.0;
        for (std::size_t a = 0; a < ns; ++a)
          if (!is_pivot[a] && std::abs(E[a * nf + k]) > best_abs) {
            best = a;
            best_abs = std::abs(E[a * nf + k]);
          }
        if (best == ns || best_abs < kDependent)
          refuse("reaction '" + syms_[fast[k]].id + "'",
                 "is fast, and its stoichiometry is a combination of the other fast reactions' "
                 "(their equilibria would overdetermine the species); not supported",
                 syms_[fast[k]].element);
        is_pivot[best] = 1;
        pivot_row[k] = best;
        for (std::size_t a = 0; a < ns; ++a) {
          if (a == best || E[a * nf + k] == 0.0) continue;
          const double f = E[a * nf + k] / E[best * nf + k];
          for (std::size_t q = 0; q < nf; ++q) E[a * nf + q] -= f * E[best * nf + q];
        }
      }
      // B = N_f[P] (nf × nf, rows in pivot order) and its inverse.
      std::vector<double> B(nf * nf), Binv(nf * nf, 0.0);
      for (std::size_t k = 0; k < nf; ++k) {
        for (std::size_t q = 0; q < nf; ++q) B[k * nf + q] = Nd[pivot_row[k] * nf + q];
        Binv[k * nf + k] = 1.0;
      }
      for (std::size_t c = 0; c < nf; ++c) {  // Gauss–Jordan with partial pivoting
        std::size_t best = c;
        for (std::size_t r = c + 1; r < nf; ++r)
          if (std::abs(B[r * nf + c]) > std::abs(B[best * nf + c])) best = r;
        for (std::size_t q = 0; q < nf; ++q) {
          std::swap(B[c * nf + q], B[best * nf + q]);
          std::swap(Binv[c * nf + q], Binv[best * nf + q]);
        }
        const double d = B[c * nf + c];
        for (std::size_t q = 0; q < nf; ++q) {
          B[c * nf + q] /= d;
          Binv[c * nf + q] /= d;
        }
        for (std::size_t r = 0; r < nf; ++r) {
          if (r == c || B[r * nf + c] == 0.0) continue;
          const double f = B[r * nf + c];
          for (std::size_t q = 0; q < nf; ++q) {
            B[r * nf + q] -= f * B[c * nf + q];
            Binv[r * nf + q] -= f * Binv[c * nf + q];
          }
        }
      }
      for (std::size_t a = 0; a < ns; ++a) {
        if (is_pivot[a]) continue;
        M[a].assign(nf, Node::constant(0.0));
        for (std::size_t k = 0; k < nf; ++k) {
          double m = 0.0;
          for (std::size_t q = 0; q < nf; ++q) m += Nd[a * nf + q] * Binv[q * nf + k];
          M[a][k] = Node::constant(m);
        }
      }
    }
    // Amount a of a species from its value u (u·V in concentration) and back.
    auto amount = [&](const Symbol& s, Node u) {
      return s.hosu ? u : mul(std::move(u), Node::var(index_of(s.compartment, s.id, "compartment")));
    };
    // Slow rates and stated initial values of the species, before any changes.
    std::vector<Node> slow(ns), initial(ns);
    for (std::size_t a = 0; a < ns; ++a) {
      slow[a] = reaction_sum(syms_[species[a]], true);
      if (factor[a].kind != Node::Kind::Constant) slow[a] = mul(factor[a], std::move(slow[a]));
      initial[a] = amount(syms_[species[a]], syms_[species[a]].initial);
    }
    // Pivot species: algebraic, 0 = the kinetic law of their fast reaction.
    for (std::size_t k = 0; k < nf; ++k) {
      Symbol& s = syms_[species[pivot_row[k]]];
      s.by_reactions = false;
      s.fast = true;
      s.algebraic = true;
      s.rhs = Node::var(fast[k]);
      s.where = "equilibrium of fast reaction '" + syms_[fast[k]].id + "' (determining species '" +
                s.id + "')";
      s.text = "0 = " + syms_[fast[k]].text;
      s.element = syms_[fast[k]].element;
    }
    for (std::size_t a = 0; a < ns; ++a) {
      if (is_pivot[a]) continue;
      Node rate = slow[a], init = initial[a], others = Node::constant(0.0);
      for (std::size_t k = 0; k < nf; ++k) {
        const Node& m = M[a][k];
        if (m.kind == Node::Kind::Constant && m.value == 0.0) continue;
        const std::size_t b = pivot_row[k];
        const Symbol& p = syms_[species[b]];
        rate = sub(std::move(rate), mul(m, slow[b]));
        init = sub(std::move(init), mul(m, initial[b]));
        others = add(std::move(others), mul(m, amount(p, Node::var(species[b]))));
      }
      Symbol total;
      total.id = syms_[species[a]].id + "_total";
      while (by_id_.count(total.id)) total.id += "_";
      total.what = "species";
      total.kind = Kind::State;
      total.state_kind = StateKind::SpeciesAmount;
      total.compartment = syms_[species[a]].compartment;
      total.hosu = true;
      total.rhs = std::move(rate);
      total.initial = std::move(init);
      total.where = "conserved amount of species '" + syms_[species[a]].id +
                    "' under the fast reactions";
      total.element = syms_[species[a]].element;
      const std::uint32_t t = add_symbol(std::move(total));
      Symbol& s = syms_[species[a]];
      s.by_reactions = false;
      s.fast = true;
      s.kind = Kind::Intermediate;
      Node a_j = add(Node::var(t), std::move(others));
      s.value = s.hosu ? std::move(a_j)
                       : div(std::move(a_j), Node::var(index_of(s.compartment, s.id, "compartment")));
      s.initial = Node{};
      s.rhs = Node{};
      s.where = "species '" + s.id + "' from its conserved amount under the fast reactions";
    }
  }

  /// Rules and initial assignments of one symbol; `stated` is its value
  /// from the element's attribute (in its math units).
  void define(Symbol& s, Node stated) {
    const std::string label = s.what + " '" + s.id + "'";
    // An algebraic unknown's guess: its stated value, else 1 (classify).
    Node initial = s.algebraic && s.what != "species" ? Node::constant(s.number) : std::move(stated);
    if (auto it = initial_assignment_.find(s.id); it != initial_assignment_.end()) {
      Reading here(*this, it->second);
      if (!it->second->isSetMath()) refuse("initial assignment for " + label, "has no math");
      initial = convert(it->second->getMath(), "initial assignment for " + label);
      if (s.kind == Kind::Intermediate && !s.assignment_rule) {
        s.where = "initial assignment for " + label;
        s.text = formula(it->second->getMath());
        s.element = it->second;
      }
    }
    if (s.assignment_rule) {
      const auto rule = assignment_.find(s.id);
      if (rule == assignment_.end()) refuse(label, "has no assignment rule (internal: classified as one)");
      const libsbml::Rule* r = rule->second;
      Reading here(*this, r);
      s.element = r;
      if (!r->isSetMath()) refuse("assignment rule for " + label, "has no math");
      s.where = "assignment rule for " + label;
      s.value = convert(r->getMath(), s.where);
      s.text = formula(r->getMath());
      return;
    }
    if (s.kind == Kind::Intermediate) {
      s.value = std::move(initial);
      if (s.where.empty()) s.where = "value of " + label;
      return;
    }
    if (s.kind == Kind::State) {
      s.initial = std::move(initial);
      if (s.algebraic) {
        const auto& [index, rule] = algebraic_rules_[algebraic_.at(s.id)];
        Reading here(*this, rule);
        s.element = rule;
        s.where = "algebraic rule " + std::to_string(index + 1) + " (determining " + label + ")";
        s.rhs = convert(rule->getMath(), s.where);
        s.text = "0 = " + formula(rule->getMath());
      } else if (s.rate_rule) {
        const auto rule = rate_.find(s.id);
        if (rule == rate_.end()) refuse(label, "has no rate rule (internal: classified as one)");
        const libsbml::Rule* r = rule->second;
        Reading here(*this, r);
        s.element = r;
        if (!r->isSetMath()) refuse("rate rule for " + label, "has no math");
        s.where = "rate rule for " + label;
        s.rhs = convert(r->getMath(), s.where);
        s.text = formula(r->getMath());
      } else if (!s.by_reactions) {
        // A boundary or constant species without rules: its amount is
        // constant; in concentration in a changing compartment it dilutes.
        s.rhs = Node::constant(0.0);
        s.where = "constant amount of " + label;
        if (s.what == "species" && !s.hosu) {
          const std::uint32_t c = index_of(s.compartment, label, "compartment");
          const Symbol& comp = syms_[c];
          if (comp.kind == Kind::State)
            s.rhs = Node::apply(Op::Neg, {div(mul(Node::var(index_of(s.id, label, "id")), comp.rhs),
                                              Node::var(c))});
        }
      }
    }
  }

  // ---- events ---------------------------------------------------------------

  static std::string event_label(const libsbml::Event* e, unsigned i) {
    return e->isSetId() ? "event '" + e->getId() + "'" : "event " + std::to_string(i + 1);
  }

  /// What events assign: those symbols become states (register_symbols).
  void collect_event_targets() {
    for (unsigned i = 0; i < m_->getNumEvents(); ++i) {
      const libsbml::Event* e = m_->getEvent(i);
      std::set<std::string> seen;
      for (unsigned k = 0; k < e->getNumEventAssignments(); ++k) {
        const auto* a = e->getEventAssignment(k);
        Reading here(*this, a);
        if (!a->isSetMath()) continue;  // Level 3 Version 2: ignored without math
        if (!seen.insert(a->getVariable()).second)
          refuse(event_label(e, i) + " (variable '" + a->getVariable() + "')",
                 "assigns the variable twice (invalid SBML)");
        event_target_.emplace(a->getVariable(), event_label(e, i));
        event_assignment_.emplace(a->getVariable(), a);
      }
    }
  }

  /// Every id a math tree names (function-call arguments included).
  static void names_in(const libsbml::ASTNode* a, std::set<std::string>& out) {
    if (!a) return;
    if (a->getType() == AST_NAME && a->getName()) out.insert(a->getName());
    for (unsigned i = 0; i < a->getNumChildren(); ++i) names_in(a->getChild(i), out);
  }

  std::string algebraic_label(std::size_t k) const {
    const auto& [index, rule] = algebraic_rules_[k];
    return "algebraic rule " + std::to_string(index + 1) + " ('0 = " + formula(rule->getMath()) + "')";
  }

  /// Algebraic rules 0 = g(…) (SBML: the model must be structurally
  /// determined): each rule determines one variable that nothing else
  /// determines — a compartment, species, parameter or species reference
  /// that is not constant, has no assignment or rate rule and (a species) is
  /// not changed by a reaction — and that the rule's math uses, directly or
  /// through assignment rules and reaction rates. The rules and these
  /// candidates are matched one to one (augmenting paths; a variable no
  /// event assigns is tried first). A rule left without a variable is
  /// refused by name: the model is overdetermined (SBML's structural
  /// determination fails). The chosen variables become algebraic states
  /// (ode::EquationModel::set_algebraic_states); whether g_z is regular
  /// (index 1) is checked at the start time by the integrator.
  void choose_algebraic_unknowns() {
    if (algebraic_rules_.empty()) return;
    const bool level1 = m_->getLevel() == 1;
    std::set<std::string> by_reactions;
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      for (const auto* list : {r->getListOfReactants(), r->getListOfProducts()})
        for (unsigned k = 0; k < list->size(); ++k) {
          const auto* sr = static_cast<const libsbml::SpeciesReference*>(list->get(k));
          const libsbml::Species* sp = m_->getSpecies(sr->getSpecies());
          if (sp && !sp->getBoundaryCondition()) by_reactions.insert(sr->getSpecies());
        }
    }
    std::set<std::string> candidates;
    auto unruled = [&](const std::string& id) { return !assignment_.count(id) && !rate_.count(id); };
    for (unsigned i = 0; i < m_->getNumCompartments(); ++i) {
      const libsbml::Compartment* c = m_->getCompartment(i);
      if ((level1 || !c->getConstant()) && unruled(c->getId())) candidates.insert(c->getId());
    }
    for (unsigned i = 0; i < m_->getNumSpecies(); ++i) {
      const libsbml::Species* sp = m_->getSpecies(i);
      if ((level1 || !sp->getConstant()) && unruled(sp->getId()) && !by_reactions.count(sp->getId()))
        candidates.insert(sp->getId());
    }
    for (unsigned i = 0; i < m_->getNumParameters(); ++i) {
      const libsbml::Parameter* p = m_->getParameter(i);
      if ((level1 || !p->getConstant()) && unruled(p->getId())) candidates.insert(p->getId());
    }
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      for (const auto* list : {r->getListOfReactants(), r->getListOfProducts()})
        for (unsigned k = 0; k < list->size(); ++k) {
          const auto* sr = static_cast<const libsbml::SpeciesReference*>(list->get(k));
          if (sr->isSetId() && m_->getLevel() >= 3 && !sr->getConstant() && unruled(sr->getId()))
            candidates.insert(sr->getId());
        }
    }
    // What each rule reads, through assignment rules and reaction rates.
    std::map<std::string, const libsbml::ASTNode*> through;
    for (const auto& [id, r] : assignment_) through[id] = r->getMath();
    for (unsigned i = 0; i < m_->getNumReactions(); ++i) {
      const libsbml::Reaction* r = m_->getReaction(i);
      if (r->isSetKineticLaw() && r->getKineticLaw()->isSetMath())
        through[r->getId()] = r->getKineticLaw()->getMath();
    }
    const std::size_t n = algebraic_rules_.size();
    std::vector<std::vector<std::string>> options(n);
    for (std::size_t k = 0; k < n; ++k) {
      std::set<std::string> seen;
      std::vector<const libsbml::ASTNode*> todo{algebraic_rules_[k].second->getMath()};
      while (!todo.empty()) {
        std::set<std::string> names;
        names_in(todo.back(), names);
        todo.pop_back();
        for (const std::string& id : names) {
          if (!seen.insert(id).second) continue;
          if (const auto it = through.find(id); it != through.end()) todo.push_back(it->second);
        }
      }
      for (int pass = 0; pass < 2; ++pass)  // variables no event assigns first
        for (const std::string& id : seen)
          if (candidates.count(id) && (event_target_.count(id) > 0) == (pass == 1))
            options[k].push_back(id);
    }
    // Kuhn's augmenting paths: rule k ↦ owner[variable].
    std::map<std::string, std::size_t> owner;
    std::function<bool(std::size_t, std::set<std::string>&)> place =
        [&](std::size_t k, std::set<std::string>& visited) {
          for (const std::string& id : options[k]) {
            if (!visited.insert(id).second) continue;
            const auto it = owner.find(id);
            if (it == owner.end() || place(it->second, visited)) {
              owner[id] = k;
              return true;
            }
          }
          return false;
        };
    for (std::size_t k = 0; k < n; ++k) {
      std::set<std::string> visited;
      if (place(k, visited)) continue;
      std::string read;
      for (const std::string& id : options[k]) read += (read.empty() ? "'" : ", '") + id + "'";
      refuse(algebraic_label(k),
             "the model is not structurally determined: no variable is left for this rule to "
             "determine (" + (options[k].empty()
                                  ? std::string("it reads no variable that is not constant and "
                                                "not already set by a rule or by reactions")
                                  : "the variables it could determine, " + read +
                                        ", are determined by other algebraic rules") +
             ")", algebraic_rules_[k].second);
    }
    for (const auto& [id, k] : owner) {
      if (const auto ev = event_target_.find(id); ev != event_target_.end())
        refuse(algebraic_label(k), "determines '" + id + "', which " + ev->second +
                                       " also assigns; an event may not assign a variable an "
                                       "algebraic rule determines",
               algebraic_rules_[k].second);
      algebraic_.emplace(id, k);
    }
  }

  /// Whether a trigger holds on a window of one quantity (S > 0.18 && S <
  /// 0.19: a conjunction of relations sharing a variable that is not a
  /// constant parameter), which can turn true and false again between two
  /// steps, where the event driver, which decides on each step's end, would
  /// miss it. (A conjunction of relations on different quantities, e.g.
  /// h <= 0 && v < 0, is not a window.)
  bool has_window(const Node& n, bool negated = false) const {
    if (n.kind != Node::Kind::Apply) return false;
    if (n.op == Op::Not) {
      for (const Node& a : n.args)
        if (has_window(a, !negated)) return true;
      return false;
    }
    if (n.op != Op::And && n.op != Op::Or) return false;
    const bool conjunction = (n.op == Op::And) != negated;
    if (conjunction) {
      // The relations this conjunction joins (through nested conjunctions).
      std::vector<std::set<std::uint32_t>> relations;
      std::function<void(const Node&, bool)> gather = [&](const Node& c, bool neg) {
        if (c.kind != Node::Kind::Apply) return;
        if (c.op == Op::Not) {
          for (const Node& a : c.args) gather(a, !neg);
        } else if ((c.op == Op::And) != neg && (c.op == Op::And || c.op == Op::Or)) {
          for (const Node& a : c.args) gather(a, neg);
        } else if (c.op == Op::Lt || c.op == Op::Le || c.op == Op::Gt || c.op == Op::Ge) {
          std::set<std::uint32_t> vars, varying;
          collect_variables(c, vars);
          for (std::uint32_t v : vars)
            if (syms_[v].kind != Kind::Parameter) varying.insert(v);
          relations.push_back(std::move(varying));
        }
      };
      gather(n, negated);
      for (std::size_t a = 0; a < relations.size(); ++a)
        for (std::size_t b = a + 1; b < relations.size(); ++b)
          for (std::uint32_t v : relations[a])
            if (relations[b].count(v)) return true;
    }
    for (const Node& a : n.args)
      if (has_window(a, negated)) return true;
    return false;
  }

  /// A window trigger with each relation on something that varies replaced
  /// by its switching function's mode (m > 0.5, mode_of): the driver then
  /// locates each relation's own crossing (the mode's events), and the
  /// trigger, a function of the modes, is evaluated again after they fire
  /// at that instant — a window opened and closed within one step is seen.
  Node window_to_modes(const Node& n, const std::string& where, const std::string& text) {
    if (n.op == Op::Lt || n.op == Op::Le || n.op == Op::Gt || n.op == Op::Ge) {
      std::set<std::uint32_t> vars;
      collect_variables(n, vars);
      const bool varies = std::any_of(vars.begin(), vars.end(), [&](std::uint32_t v) {
        return syms_[v].kind != Kind::Parameter;
      });
      if (varies)
        return Node::apply(Op::Gt, {Node::var(mode_of(n, where, text, at_)), Node::constant(0.5)});
      return n;
    }
    Node c = n;
    for (Node& a : c.args) a = window_to_modes(a, where, text);
    return c;
  }

  /// Events whose trigger reads a variable an algebraic rule determines
  /// (directly or through intermediates) are refused: the event driver
  /// re-solves the algebraic states only after all executions of an
  /// instant, so a trigger would see their values from before it.
  void check_event_triggers() const {
    if (algebraic_.empty()) return;
    std::vector<int> memo(syms_.size(), -1);
    std::function<long(std::uint32_t)> algebraic_in = [&](std::uint32_t i) -> long {
      if (memo[i] == -2) return -1;
      const Symbol& s = syms_[i];
      if (s.algebraic) return i;
      if (s.kind != Kind::Intermediate) return -1;
      memo[i] = -2;  // cycles are reported by order_intermediates
      std::set<std::uint32_t> deps;
      collect_variables(s.value, deps);
      for (std::uint32_t d : deps)
        if (const long a = algebraic_in(d); a >= 0) return memo[i] = -1, a;
      memo[i] = -1;
      return -1;
    };
    for (const EventDef& d : events_) {
      std::set<std::uint32_t> deps;
      collect_variables(d.trigger, deps);
      for (std::uint32_t v : deps)
        if (const long a = algebraic_in(v); a >= 0)
          refuse("trigger of " + d.label,
                 "reads '" + syms_[static_cast<std::size_t>(a)].id +
                     "', which an algebraic rule determines; events whose triggers depend on "
                     "algebraic states are not supported (the event driver re-solves them only "
                     "after an instant's executions)",
                 d.element);
    }
  }

  /// Pass 2 for events: their math over the symbols.
  void define_events() {
    for (unsigned i = 0; i < m_->getNumEvents(); ++i) {
      const libsbml::Event* e = m_->getEvent(i);
      EventDef d;
      d.label = event_label(e, i);
      d.element = e;
      Reading here(*this, e);
      d.name = e->isSetId() ? e->getId() : e->isSetName() ? e->getName() : d.label;
      const auto* trigger = e->getTrigger();
      // Level 3 Version 2: a trigger without math is never true, and the
      // event never fires (suite cases 01238, 01239).
      if (!trigger || !trigger->isSetMath()) continue;
      d.trigger = convert(trigger->getMath(), "trigger of " + d.label);
      d.trigger_text = formula(trigger->getMath());
      if (has_window(d.trigger))
        d.trigger = window_to_modes(d.trigger, "trigger of " + d.label, d.trigger_text);
      // Level 3 states both attributes; Level 2's triggers behave as
      // initialValue = persistent = true.
      if (trigger->isSetInitialValue()) d.initial_value = trigger->getInitialValue();
      if (trigger->isSetPersistent()) d.persistent = trigger->getPersistent();
      if (e->isSetUseValuesFromTriggerTime())
        d.use_values_from_trigger_time = e->getUseValuesFromTriggerTime();
      if (e->isSetDelay() && e->getDelay()->isSetMath())
        d.delay = convert(e->getDelay()->getMath(), "delay of " + d.label);
      if (e->isSetPriority() && e->getPriority()->isSetMath()) {
        d.priority = convert(e->getPriority()->getMath(), "priority of " + d.label);
        d.priority_text = formula(e->getPriority()->getMath());
      }
      for (unsigned k = 0; k < e->getNumEventAssignments(); ++k) {
        const auto* a = e->getEventAssignment(k);
        Reading assignment(*this, a);
        if (!a->isSetMath()) continue;
        const std::string where = "event assignment of " + d.label + " (variable '" +
                                  a->getVariable() + "')";
        d.assign.emplace_back(index_of(a->getVariable(), where, "variable"),
                              convert(a->getMath(), where));
        d.assign_text.push_back(formula(a->getMath()));
      }
      // An event that assigns nothing changes nothing: not needed.
      if (!d.assign.empty()) events_.push_back(std::move(d));
    }
    // SBML executes simultaneous events of equal priority in random order:
    // every event with a priority asks the driver for it
    // (EventAttributes::random_order_among_equal_priorities, a seeded and
    // reproducible draw). Events that state the same priority and compete
    // (one assigns a symbol the other assigns or reads, in its trigger,
    // assignments, delay or priority, through assignment rules too) are
    // reported, as their results then depend on the draw.
    auto reads = [&](const EventDef& d) {
      std::set<std::uint32_t> out;
      std::function<void(const Node&)> visit = [&](const Node& n) {
        if (n.kind == Node::Kind::Variable) {
          if (!out.insert(n.variable).second) return;
          const Symbol& v = syms_[n.variable];
          if (v.kind == Kind::Intermediate) visit(v.value);
          return;
        }
        for (const Node& a : n.args) visit(a);
      };
      visit(d.trigger);
      for (const auto& [sym, value] : d.assign) visit(value);
      if (d.delay) visit(*d.delay);
      if (d.priority) visit(*d.priority);
      return out;
    };
    auto commute = [&](const EventDef& a, const EventDef& b) {
      const std::set<std::uint32_t> ra = reads(a), rb = reads(b);
      for (const auto& [sa, va] : a.assign) {
        if (rb.count(sa)) return false;
        for (const auto& [sb, vb] : b.assign)
          if (sa == sb) return false;
      }
      for (const auto& [sb, vb] : b.assign)
        if (ra.count(sb)) return false;
      return true;
    };
    for (std::size_t i = 0; i < events_.size(); ++i)
      for (std::size_t j = i + 1; j < events_.size(); ++j) {
        const EventDef &a = events_[i], &b = events_[j];
        if (a.priority_text.empty() || a.priority_text != b.priority_text || commute(a, b)) continue;
        random_order_.push_back(a.label + " and " + b.label + " (priority '" + a.priority_text +
                                "')");
      }
  }

  /// Whether a tree is constant between events: it reads no time and only
  /// parameters and states whose derivative is zero (changed by events
  /// alone), through intermediates too.
  bool constant_between_events(const Node& n) const {
    if (n.kind == Node::Kind::Variable) {
      const Symbol& v = syms_[n.variable];
      switch (v.kind) {
        case Kind::Time: return false;
        case Kind::Parameter: return true;
        case Kind::State:
          return !v.algebraic && v.rhs.kind == Node::Kind::Constant && v.rhs.value == 0.0;
        case Kind::Intermediate: return !v.time_dependent && constant_between_events(v.value);
      }
      return false;
    }
    for (const Node& a : n.args)
      if (!constant_between_events(a)) return false;
    return true;
  }

  /// A trigger's eq(a, b) / neq(a, b) whose operands are constant between
  /// events (a counter an event increments) as a ≥ b ∧ a ≤ b / a > b ∨ a < b:
  /// their roots a − b do not move between events and are evaluated again
  /// after each execution, so the sides say exactly whether a = b. An
  /// equality of quantities that vary in time stays refused (the condition
  /// holds at an instant only).
  Node discrete_equalities(const Node& n) const {
    if (n.kind != Node::Kind::Apply) return n;
    if ((n.op == Op::Eq || n.op == Op::Ne) && n.args.size() == 2 && constant_between_events(n))
      return n.op == Op::Eq
                 ? Node::apply(Op::And, {Node::apply(Op::Ge, {n.args[0], n.args[1]}),
                                         Node::apply(Op::Le, {n.args[0], n.args[1]})})
                 : Node::apply(Op::Or, {Node::apply(Op::Gt, {n.args[0], n.args[1]}),
                                        Node::apply(Op::Lt, {n.args[0], n.args[1]})});
    Node out = n;
    for (Node& a : out.args) a = discrete_equalities(a);
    return out;
  }

  /// The events as ode::EquationModel events over its variables (t,
  /// states, parameters, intermediates), `remap` the symbols' numbering.
  /// A compartment's new size V⁺ keeps the amounts of the species in
  /// concentration in it that the event does not assign: C⁺ = C⁻ V⁻ / V⁺.
  std::vector<ode::EquationModel::Event> compile_events(
      const std::vector<std::uint32_t>& remap, std::size_t n_all,
      const std::function<Node(const Node&)>& renumber) const {
    std::vector<ode::EquationModel::Event> out;
    for (const EventDef& d : events_) {
      Reading here(*this, d.element);
      ode::EquationModel::Event e;
      const std::string context = located(d.element) + ": " + d.label;
      e.attributes.name = d.name;
      e.attributes.initial_value = d.initial_value;
      e.attributes.persistent = d.persistent;
      e.attributes.use_values_from_trigger_time = d.use_values_from_trigger_time;
      e.attributes.random_order_among_equal_priorities = d.priority.has_value();
      e.trigger = ode::Condition::from_tree(renumber(discrete_equalities(d.trigger)), n_all,
                                            d.trigger_text, context + " (trigger)");
      // Compartments this event resizes: symbol → the new size.
      std::map<std::string, std::pair<std::uint32_t, const Node*>> resized;
      std::set<std::uint32_t> assigned;
      for (const auto& [sym, value] : d.assign) {
        assigned.insert(sym);
        if (syms_[sym].what == "compartment") resized[syms_[sym].id] = {sym, &value};
      }
      // A species in concentration in a resized compartment keeps its amount
      // (SBML: the amount is what a species is; its concentration derives
      // from it): C⁺ = C V⁻ / V⁺, with C its assigned value when the event
      // assigns it too (computed with the size before the event), else C⁻.
      auto in_resized = [&](const Symbol& sp) -> const std::pair<std::uint32_t, const Node*>* {
        if (sp.what != "species" || sp.hosu) return nullptr;
        const auto it = resized.find(sp.compartment);
        if (it == resized.end()) return nullptr;
        if (d.delay && d.use_values_from_trigger_time)
          refuse(d.label, "resizes compartment '" + sp.compartment +
                              "' after a delay with values from the trigger time, while "
                              "species '" + sp.id + "' is in concentration in it; not supported");
        return &it->second;
      };
      auto add = [&](std::uint32_t sym, Node value, const std::string& text) {
        const Symbol& s = syms_[sym];
        if (s.kind != Kind::State)
          refuse("event assignment of " + d.label + " (variable '" + s.id + "')",
                 "the variable is not a state of the imported model (internal)");
        e.targets.push_back(remap[sym] - 1);
        e.values.push_back(expr::Program::build(renumber(value), n_all, text, context));
      };
      for (std::size_t k = 0; k < d.assign.size(); ++k) {
        const auto& [sym, value] = d.assign[k];
        if (const auto* c = in_resized(syms_[sym]))
          add(sym, div(mul(value, Node::var(c->first)), *c->second),
              "(" + d.assign_text[k] + ") * " + syms_[c->first].id + " / new size");
        else
          add(sym, value, d.assign_text[k]);
      }
      for (std::uint32_t j = 0; j < syms_.size(); ++j) {
        const Symbol& sp = syms_[j];
        if (assigned.count(j) || (sp.kind == Kind::Intermediate && sp.assignment_rule)) continue;
        const auto* c = in_resized(sp);
        if (!c) continue;
        if (sp.kind != Kind::State)
          refuse(d.label, "resizes compartment '" + sp.compartment + "', which holds species '" +
                              sp.id + "' in concentration that is constant; its concentration "
                              "after the event is not supported");
        add(j, div(mul(Node::var(j), Node::var(c->first)), *c->second),
            sp.id + " * " + sp.compartment + " / new size");
      }
      if (d.delay)
        e.delay = expr::Program::build(renumber(*d.delay), n_all, "delay", context + " (delay)");
      if (d.priority)
        e.priority = expr::Program::build(renumber(*d.priority), n_all, "priority",
                                          context + " (priority)");
      out.push_back(std::move(e));
    }
    return out;
  }

  /// An initial assignment is evaluated once, at the start time. A symbol
  /// it sets that no rule changes keeps that value; when the value depends
  /// on time or on a state (directly or through intermediates), the symbol
  /// becomes a state with a zero derivative and that initial value. The
  /// same holds a constant species' amount stated as a concentration in a
  /// compartment that changes (its value is C0·V(t0), not C0·V(t)).
  void hold_initial_assignments() {
    std::vector<int> memo(syms_.size(), -1);  // -1 unknown, 0 no, 1 yes, 2 visiting
    std::function<bool(std::uint32_t)> varies = [&](std::uint32_t i) -> bool {
      if (memo[i] >= 0) return memo[i] == 1;
      const Symbol& s = syms_[i];
      if (s.kind == Kind::Time || s.kind == Kind::State || s.delay >= 0)
        return (memo[i] = 1) == 1;
      if (s.kind == Kind::Parameter) return (memo[i] = 0) == 1;
      memo[i] = 2;  // a cycle is reported by order_intermediates
      std::set<std::uint32_t> deps;
      collect_variables(s.value, deps);
      bool v = false;
      for (std::uint32_t d : deps)
        if (memo[d] != 2 && varies(d)) v = true;
      memo[i] = v ? 1 : 0;
      return v;
    };
    std::vector<std::uint32_t> held;
    for (std::uint32_t i = 0; i < syms_.size(); ++i) {
      const Symbol& s = syms_[i];
      if (s.kind == Kind::Intermediate && !s.assignment_rule && s.what != "reaction" &&
          s.amount < 0 && !s.fast && (initial_assignment_.count(s.id) || s.what == "species") &&
          varies(i))
        held.push_back(i);
    }
    for (std::uint32_t i : held) {
      Symbol& s = syms_[i];
      s.kind = Kind::State;
      s.initial = std::move(s.value);
      s.value = Node{};
      s.rhs = Node::constant(0.0);
    }
  }

  // ---- MathML → Node --------------------------------------------------------

  /// Function arguments in scope while a function body is converted.
  using Scope = std::map<std::string, Node>;

  Node convert(const libsbml::ASTNode* a, const std::string& where) {
    Scope none;
    return convert(a, where, none);
  }

  [[noreturn]] void refuse_math(const libsbml::ASTNode* a, const std::string& where,
                                const std::string& problem) const {
    const libsbml::SBase* parent = a ? a->getParentSBMLObject() : nullptr;
    refuse(where, problem + " in '" + formula(a) + "'", parent ? parent : at_);
  }

  Node child(const libsbml::ASTNode* a, unsigned i, const std::string& where, const Scope& scope) {
    return convert(a->getChild(i), where, scope);
  }

  Node unary(Op op, const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    if (a->getNumChildren() != 1) refuse_math(a, where, "expected one argument");
    return Node::apply(op, {child(a, 0, where, scope)});
  }

  /// Left fold of an n-ary operator (n ≥ 1).
  Node fold(Op op, const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    Node out = child(a, 0, where, scope);
    for (unsigned i = 1; i < a->getNumChildren(); ++i)
      out = Node::apply(op, {std::move(out), child(a, i, where, scope)});
    return out;
  }

  /// a op b and b op c and …: SBML's n-ary relations.
  Node relation(Op op, const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    if (a->getNumChildren() < 2) refuse_math(a, where, "a relation needs two arguments");
    Node out;
    for (unsigned i = 0; i + 1 < a->getNumChildren(); ++i) {
      Node r = Node::apply(op, {child(a, i, where, scope), child(a, i + 1, where, scope)});
      out = i == 0 ? std::move(r) : Node::apply(Op::And, {std::move(out), std::move(r)});
    }
    return out;
  }

  Node convert(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    using namespace libsbml;
    if (!a) refuse(where, "has no math");
    const unsigned n = a->getNumChildren();
    switch (a->getType()) {
      case AST_INTEGER: return Node::constant(static_cast<double>(a->getInteger()));
      case AST_REAL: case AST_REAL_E: case AST_RATIONAL: return Node::constant(a->getReal());
      case AST_CONSTANT_E: return Node::constant(std::numbers::e);
      case AST_CONSTANT_PI: return Node::constant(std::numbers::pi);
      case AST_CONSTANT_TRUE: return Node::constant(1.0);
      case AST_CONSTANT_FALSE: return Node::constant(0.0);
      // SBML Level 3 fixes avogadro at the 2006 CODATA value (case 01323).
      case AST_NAME_AVOGADRO: return Node::constant(6.02214179e23);
      case AST_NAME_TIME: return Node::var(0);
      case AST_NAME: return name(a, where, scope);
      case AST_PLUS:
        if (n == 0) return Node::constant(0.0);
        return fold(Op::Add, a, where, scope);
      case AST_TIMES:
        if (n == 0) return Node::constant(1.0);
        return fold(Op::Mul, a, where, scope);
      case AST_MINUS:
        if (n == 1) return Node::apply(Op::Neg, {child(a, 0, where, scope)});
        if (n != 2) refuse_math(a, where, "minus takes one or two arguments");
        return sub(child(a, 0, where, scope), child(a, 1, where, scope));
      case AST_DIVIDE:
        if (n != 2) refuse_math(a, where, "divide takes two arguments");
        return div(child(a, 0, where, scope), child(a, 1, where, scope));
      case AST_POWER: case AST_FUNCTION_POWER:
        if (n != 2) refuse_math(a, where, "power takes two arguments");
        return Node::apply(Op::Pow, {child(a, 0, where, scope), child(a, 1, where, scope)});
      case AST_FUNCTION_ROOT:
        if (n == 1) return Node::apply(Op::Sqrt, {child(a, 0, where, scope)});
        if (n != 2) refuse_math(a, where, "root takes a degree and one argument");
        return Node::apply(Op::Pow, {child(a, 1, where, scope),
                                     div(Node::constant(1.0), child(a, 0, where, scope))});
      case AST_FUNCTION_LOG:
        if (n == 1) return Node::apply(Op::Log10, {child(a, 0, where, scope)});
        if (n != 2) refuse_math(a, where, "log takes a base and one argument");
        return div(Node::apply(Op::Log, {child(a, 1, where, scope)}),
                   Node::apply(Op::Log, {child(a, 0, where, scope)}));
      case AST_FUNCTION_LN: return unary(Op::Log, a, where, scope);
      case AST_FUNCTION_EXP: return unary(Op::Exp, a, where, scope);
      case AST_FUNCTION_ABS: return unary(Op::Abs, a, where, scope);
      case AST_FUNCTION_FLOOR: return unary(Op::Floor, a, where, scope);
      case AST_FUNCTION_CEILING: return unary(Op::Ceil, a, where, scope);
      case AST_FUNCTION_SIN: return unary(Op::Sin, a, where, scope);
      case AST_FUNCTION_COS: return unary(Op::Cos, a, where, scope);
      case AST_FUNCTION_TAN: return unary(Op::Tan, a, where, scope);
      case AST_FUNCTION_ARCSIN: return unary(Op::Asin, a, where, scope);
      case AST_FUNCTION_ARCCOS: return unary(Op::Acos, a, where, scope);
      case AST_FUNCTION_ARCTAN: return unary(Op::Atan, a, where, scope);
      case AST_FUNCTION_SINH: return unary(Op::Sinh, a, where, scope);
      case AST_FUNCTION_COSH: return unary(Op::Cosh, a, where, scope);
      case AST_FUNCTION_TANH: return unary(Op::Tanh, a, where, scope);
      case AST_FUNCTION_ARCSINH: return unary(Op::Asinh, a, where, scope);
      case AST_FUNCTION_ARCCOSH: return unary(Op::Acosh, a, where, scope);
      case AST_FUNCTION_ARCTANH: return unary(Op::Atanh, a, where, scope);
      case AST_FUNCTION_SEC: return div(Node::constant(1.0), unary(Op::Cos, a, where, scope));
      case AST_FUNCTION_CSC: return div(Node::constant(1.0), unary(Op::Sin, a, where, scope));
      case AST_FUNCTION_COT: return div(Node::constant(1.0), unary(Op::Tan, a, where, scope));
      case AST_FUNCTION_SECH: return div(Node::constant(1.0), unary(Op::Cosh, a, where, scope));
      case AST_FUNCTION_CSCH: return div(Node::constant(1.0), unary(Op::Sinh, a, where, scope));
      case AST_FUNCTION_COTH: return div(Node::constant(1.0), unary(Op::Tanh, a, where, scope));
      case AST_FUNCTION_MAX:
        if (n == 0) refuse_math(a, where, "max needs an argument");
        return fold(Op::Max, a, where, scope);
      case AST_FUNCTION_MIN:
        if (n == 0) refuse_math(a, where, "min needs an argument");
        return fold(Op::Min, a, where, scope);
      case AST_RELATIONAL_LT: return relation(Op::Lt, a, where, scope);
      case AST_RELATIONAL_LEQ: return relation(Op::Le, a, where, scope);
      case AST_RELATIONAL_GT: return relation(Op::Gt, a, where, scope);
      case AST_RELATIONAL_GEQ: return relation(Op::Ge, a, where, scope);
      case AST_RELATIONAL_EQ: return relation(Op::Eq, a, where, scope);
      case AST_RELATIONAL_NEQ:
        if (n != 2) refuse_math(a, where, "neq takes two arguments");
        return Node::apply(Op::Ne, {child(a, 0, where, scope), child(a, 1, where, scope)});
      case AST_LOGICAL_AND:
        if (n == 0) return Node::constant(1.0);
        return fold(Op::And, a, where, scope);
      case AST_LOGICAL_OR:
        if (n == 0) return Node::constant(0.0);
        return fold(Op::Or, a, where, scope);
      case AST_LOGICAL_NOT: return unary(Op::Not, a, where, scope);
      case AST_LOGICAL_XOR: {
        if (n == 0) return Node::constant(0.0);
        auto truth = [&](unsigned i) {
          return Node::apply(Op::Ne, {child(a, i, where, scope), Node::constant(0.0)});
        };
        Node out = truth(0);
        for (unsigned i = 1; i < n; ++i) out = Node::apply(Op::Ne, {std::move(out), truth(i)});
        return out;
      }
      case AST_FUNCTION_PIECEWISE: {
        // piecewise(v1, c1, v2, c2, …, [otherwise]): nested selects; no
        // piece true and no otherwise is undefined in SBML: NaN.
        Node out = n % 2 == 1 ? child(a, n - 1, where, scope)
                              : Node::constant(std::numeric_limits<double>::quiet_NaN());
        for (unsigned k = n / 2; k-- > 0;)
          out = Node::apply(Op::Select, {child(a, 2 * k + 1, where, scope),
                                         child(a, 2 * k, where, scope), std::move(out)});
        return out;
      }
      case AST_FUNCTION: return call(a, where, scope);
      case AST_FUNCTION_DELAY: return delay(a, where, scope);
      case AST_FUNCTION_RATE_OF: return rate_of(a, where, scope);
      case AST_FUNCTION_FACTORIAL: {
        if (n != 1) refuse_math(a, where, "factorial takes one argument");
        const Node x = child(a, 0, where, scope);
        if (x.kind != Node::Kind::Constant) {
          if (x.kind != Node::Kind::Apply || (x.op != Op::Floor && x.op != Op::Ceil))
            refuse_math(a, where, "factorial of a value that is not a constant number and not "
                                  "an integer by floor or ceiling (SBML defines factorial for "
                                  "non-negative integers) is not supported");
          return factorial_of_integer(x);
        }
        if (x.value < 0 || x.value != std::floor(x.value))
          refuse_math(a, where, "factorial of " + std::to_string(x.value) +
                                    " (SBML defines it for non-negative integers)");
        return Node::constant(std::tgamma(x.value + 1.0));
      }
      case AST_FUNCTION_QUOTIENT:
        if (n != 2) refuse_math(a, where, "quotient takes two arguments");
        return truncate(div(child(a, 0, where, scope), child(a, 1, where, scope)));
      case AST_FUNCTION_REM: {
        if (n != 2) refuse_math(a, where, "rem takes two arguments");
        Node x = child(a, 0, where, scope), y = child(a, 1, where, scope);
        return sub(x, mul(y, truncate(div(x, y))));  // the sign of x, as C's fmod
      }
      case AST_LOGICAL_IMPLIES:
        if (n != 2) refuse_math(a, where, "implies takes two arguments");
        return Node::apply(Op::Or, {Node::apply(Op::Not, {child(a, 0, where, scope)}),
                                    child(a, 1, where, scope)});
      case AST_FUNCTION_ARCSEC: return Node::apply(Op::Acos, {reciprocal(a, where, scope)});
      case AST_FUNCTION_ARCCSC: return Node::apply(Op::Asin, {reciprocal(a, where, scope)});
      case AST_FUNCTION_ARCCOT: return Node::apply(Op::Atan, {reciprocal(a, where, scope)});
      case AST_FUNCTION_ARCSECH: return Node::apply(Op::Acosh, {reciprocal(a, where, scope)});
      case AST_FUNCTION_ARCCSCH: return Node::apply(Op::Asinh, {reciprocal(a, where, scope)});
      case AST_FUNCTION_ARCCOTH: return Node::apply(Op::Atanh, {reciprocal(a, where, scope)});
      case AST_LAMBDA: refuse_math(a, where, "a lambda outside a function definition");
      default: break;
    }
    const char* type = a->getName();
    refuse_math(a, where, std::string("the MathML element ") + (type ? std::string("'") + type + "'" : "of type " + std::to_string(static_cast<int>(a->getType()))) + " is not supported");
  }

  /// n! for an integer-valued n (a floor or ceiling, whose state-dependent
  /// forms become switching functions), without comparisons:
  ///     n! = Π_{k=2}^{170} (1 + (k − 1)·min(1, max(0, n − k + 1)))
  /// (the factor is k for k ≤ n, else 1), times √(n + ½)/√(n + ½) (NaN for
  /// a negative n, where SBML leaves factorial undefined; exactly 1
  /// otherwise) and exp(10⁶·min(1, max(0, n − 170))) (170! is the largest
  /// factorial a double holds: ∞ beyond, exactly 1 below). Piecewise
  /// constant between the switches, so its derivative is 0 there.
  static Node factorial_of_integer(const Node& n) {
    constexpr int kLargest = 170;
    auto clamp01 = [](Node v) {
      return Node::apply(Op::Min, {Node::constant(1.0),
                                   Node::apply(Op::Max, {Node::constant(0.0), std::move(v)})});
    };
    std::vector<Node> factors;
    for (int k = 2; k <= kLargest; ++k)
      factors.push_back(add(Node::constant(1.0),
                            mul(Node::constant(k - 1.0),
                                clamp01(sub(n, Node::constant(k - 1.0))))));
    const Node root = Node::apply(Op::Sqrt, {add(n, Node::constant(0.5))});
    factors.push_back(div(root, root));
    factors.push_back(Node::apply(
        Op::Exp, {mul(Node::constant(1e6), clamp01(sub(n, Node::constant(kLargest))))}));
    // A balanced product keeps the tree shallow.
    while (factors.size() > 1) {
      std::vector<Node> next;
      for (std::size_t i = 0; i + 1 < factors.size(); i += 2)
        next.push_back(mul(std::move(factors[i]), std::move(factors[i + 1])));
      if (factors.size() % 2 == 1) next.push_back(std::move(factors.back()));
      factors = std::move(next);
    }
    return factors.front();
  }

  /// 1/x of a one-argument function's argument (the arc* family:
  /// arcsec x = arccos(1/x), arccot x = arctan(1/x), …).
  Node reciprocal(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    if (a->getNumChildren() != 1) refuse_math(a, where, "expected one argument");
    return div(Node::constant(1.0), child(a, 0, where, scope));
  }

  /// q rounded toward zero without a comparison (a comparison would be a
  /// switch the integrator must stop at): ⌊|q|⌋ · q / max(|q|, 1) — the
  /// last factor is sign(q) exactly whenever ⌊|q|⌋ ≠ 0.
  static Node truncate(Node q) {
    Node magnitude = Node::apply(Op::Abs, {q});
    return mul(Node::apply(Op::Floor, {magnitude}),
               div(q, Node::apply(Op::Max, {magnitude, Node::constant(1.0)})));
  }

  /// rateOf(x): x's time derivative — its right-hand side when x is a
  /// state, 0 when nothing changes it. A placeholder symbol (id
  /// "rateOf(x)", never an SBML id) until every right-hand side is known
  /// (resolve_rates).
  Node rate_of(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    if (a->getNumChildren() != 1 || a->getChild(0)->getType() != AST_NAME)
      refuse_math(a, where, "rateOf takes one symbol");
    const std::string id = a->getChild(0)->getName();
    if (scope.count(id))
      refuse_math(a, where, "rateOf of a function argument is not supported");
    if (locals_ && locals_->count(id)) return Node::constant(0.0);  // a local parameter
    const std::string name = "rateOf(" + id + ")";
    if (auto it = by_id_.find(name); it != by_id_.end()) return Node::var(it->second);
    index_of(id, where, "rateOf argument");
    Symbol s;
    s.id = name;
    s.what = "rateOf";
    s.kind = Kind::Intermediate;
    s.rate_of = id;
    s.where = where;
    s.element = at_;
    return Node::var(add_symbol(std::move(s)));
  }

  /// delay(x, d): a parameter slot that the trajectory's history fills
  /// with x(t − d) (ode::DelayedInputs: while t − d < t0 the states read
  /// their initial values and time reads t − d). In initial values it is x
  /// at t0 − d so (assemble).
  Node delay(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    if (a->getNumChildren() != 2) refuse_math(a, where, "delay takes an expression and a lag");
    Node x = child(a, 0, where, scope), d = child(a, 1, where, scope);
    const std::string key = key_of(x) + "|" + key_of(d);
    if (auto it = delay_keys_.find(key); it != delay_keys_.end()) return Node::var(it->second);
    Symbol s;
    s.id = formula(a);
    for (int k = 2; by_id_.count(s.id); ++k) s.id = formula(a) + " #" + std::to_string(k);
    s.what = "delay";
    s.kind = Kind::Parameter;
    s.number = std::numeric_limits<double>::quiet_NaN();
    s.where = where;
    s.element = at_;
    s.text = formula(a);
    s.delay = static_cast<long>(delays_.size());
    const std::string text = s.text;
    const std::uint32_t slot = add_symbol(std::move(s));
    delays_.push_back({slot, std::move(x), std::move(d), where, text, at_});
    delay_keys_[key] = slot;
    return Node::var(slot);
  }

  /// rateOf(x) read through delay(…, d) before the start: the initial
  /// history is x's initial value, so its rate is 0 — refused when that
  /// value is a formula in time (its derivative is not formed).
  Node before_start_rate(const Symbol& rate, const DelayDef& dd) const {
    const Symbol& x = syms_[by_id_.at(rate.rate_of)];
    if (x.kind == Kind::State && time_dependent_initial(x.initial))
      refuse(dd.where, "rateOf('" + x.id + "') read through a delay before the start, where the "
                       "history is '" + x.id + "''s initial value, a formula in time, is not "
                       "supported, in '" + dd.text + "'", dd.element);
    return Node::constant(0.0);
  }
  bool time_dependent_initial(const Node& n) const {
    if (n.kind == Node::Kind::Variable) {
      const Symbol& v = syms_[n.variable];
      if (v.kind == Kind::Time) return true;
      if (v.kind == Kind::Intermediate) return time_dependent_initial(v.value);
      if (v.kind == Kind::State) return time_dependent_initial(v.initial);
      return false;
    }
    for (const Node& a : n.args)
      if (time_dependent_initial(a)) return true;
    return false;
  }

  /// Fills the rateOf placeholders once every right-hand side is known.
  void resolve_rates() {
    for (Symbol& s : syms_) {
      if (s.rate_of.empty()) continue;
      const Symbol& x = syms_[by_id_.at(s.rate_of)];
      if (x.amount >= 0)
        refuse(s.where, "rateOf('" + x.id + "') of a species in concentration in a compartment "
                        "set by an assignment rule is not supported", s.element);
      if (x.fast)
        refuse(s.where, "rateOf('" + x.id + "') of a species a fast reaction changes is not "
                        "supported", s.element);
      if (x.algebraic)
        refuse(s.where, "rateOf('" + x.id + "') of a variable determined by an algebraic rule is "
                        "not supported (its derivative is not a right-hand side)", s.element);
      if (x.kind == Kind::State) s.value = x.rhs;
      else if (x.kind == Kind::Parameter || !x.assignment_rule) s.value = Node::constant(0.0);
      else
        refuse(s.where, "rateOf('" + x.id + "') of a symbol set by an assignment rule is not "
                        "supported (its derivative would need the rule's derivative)", s.element);
    }
  }

  Node name(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    const std::string id = a->getName() ? a->getName() : "";
    if (auto it = scope.find(id); it != scope.end()) return it->second;
    if (locals_)
      if (auto it = locals_->find(id); it != locals_->end()) return Node::var(it->second);
    if (auto it = by_id_.find(id); it != by_id_.end()) return Node::var(it->second);
    refuse_math(a, where, "unknown symbol '" + id + "'");
  }

  /// A call of a function definition: its body with the arguments in place.
  Node call(const libsbml::ASTNode* a, const std::string& where, const Scope& scope) {
    const std::string id = a->getName() ? a->getName() : "";
    const auto it = functions_.find(id);
    if (it == functions_.end()) refuse_math(a, where, "unknown function '" + id + "'");
    const libsbml::FunctionDefinition* f = it->second;
    const std::string label = "function definition '" + id + "'";
    if (!f->isSetMath() || !f->getBody()) refuse(label, "has no lambda body");
    if (f->getNumArguments() != a->getNumChildren())
      refuse_math(a, where, "'" + id + "' takes " + std::to_string(f->getNumArguments()) +
                                " arguments, got " + std::to_string(a->getNumChildren()));
    if (active_functions_.count(id)) refuse(label, "calls itself (recursion is not allowed)");
    Scope inner;
    for (unsigned i = 0; i < f->getNumArguments(); ++i)
      inner[f->getArgument(i)->getName()] = child(a, i, where, scope);
    active_functions_.insert(id);
    const std::map<std::string, std::uint32_t>* saved = locals_;
    locals_ = nullptr;  // a body sees its arguments and the model's globals only
    Node body = convert(f->getBody(), where + " (in " + label + ")", inner);
    locals_ = saved;
    active_functions_.erase(id);
    return body;
  }

  // ---- ordering and checks ---------------------------------------------------

  void order_intermediates() {
    std::vector<int> mark(syms_.size(), 0);  // 0 new, 1 in progress, 2 done
    std::vector<std::uint32_t> stack;
    std::function<void(std::uint32_t)> visit = [&](std::uint32_t i) {
      if (mark[i] == 2) return;
      if (mark[i] == 1) {
        std::string cycle;
        auto at = std::find(stack.begin(), stack.end(), i);
        for (; at != stack.end(); ++at) cycle += "'" + syms_[*at].id + "' -> ";
        refuse(syms_[i].where, "the definitions form a cycle: " + cycle + "'" + syms_[i].id + "'", syms_[i].element);
      }
      mark[i] = 1;
      stack.push_back(i);
      std::set<std::uint32_t> deps;
      collect_variables(syms_[i].value, deps);
      for (std::uint32_t d : deps)
        if (syms_[d].kind == Kind::Intermediate) visit(d);
      stack.pop_back();
      mark[i] = 2;
      intermediates_.push_back(i);
    };
    for (std::uint32_t i = 0; i < syms_.size(); ++i)
      if (syms_[i].kind == Kind::Intermediate) visit(i);
    // State dependence, in dependency order.
    for (Symbol& s : syms_) {
      // A delay slot varies in time and with the trajectory.
      s.state_dependent = s.kind == Kind::State || s.delay >= 0;
      s.time_dependent = s.kind == Kind::Time || s.delay >= 0;
    }
    for (std::uint32_t i : intermediates_) {
      std::set<std::uint32_t> deps;
      collect_variables(syms_[i].value, deps);
      for (std::uint32_t d : deps) {
        syms_[i].state_dependent |= syms_[d].state_dependent;
        syms_[i].time_dependent |= syms_[d].time_dependent;
      }
    }
  }

  bool time_dependent(const Node& n) const {
    if (n.kind == Node::Kind::Variable) return syms_[n.variable].time_dependent;
    for (const Node& a : n.args)
      if (time_dependent(a)) return true;
    return false;
  }

  bool state_dependent(const Node& n) const {
    if (n.kind == Node::Kind::Variable) return syms_[n.variable].state_dependent;
    for (const Node& a : n.args)
      if (state_dependent(a)) return true;
    return false;
  }

  /// A tree's structure as text (equal trees, equal keys).
  static std::string key_of(const Node& n) {
    std::string k = std::to_string(static_cast<int>(n.op));
    if (n.kind == Node::Kind::Constant) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%a", n.value);
      k += buf;
    }
    if (n.kind == Node::Kind::Variable) k += "v" + std::to_string(n.variable);
    k += "(";
    for (const Node& a : n.args) k += key_of(a) + ",";
    return k + ")";
  }

  /// [g > 0] without a comparison: ⌈min(max(g, 0), 1)⌉ (1 for every g > 0,
  /// 0 for g ≤ 0) — what a mode's initial value is written with, since
  /// initial values are expressions without relations.
  static Node positive(Node g) {
    return Node::apply(Op::Ceil, {Node::apply(Op::Min, {Node::apply(Op::Max, {std::move(g),
                                                                            Node::constant(0.0)}),
                                                        Node::constant(1.0)})});
  }

  /// State-dependent relations in the right-hand side (a piecewise's
  /// condition, a relation used as a value) become switching functions, as
  /// the events issue asks: each distinct relation r gets a mode state m_r
  /// (dm/dt = 0, m(t0) = r at t0) and two events — r turns true → m = 1,
  /// r turns false → m = 0 — and the right-hand side reads m where it read
  /// r. The event driver then locates each switch, every integrator steps
  /// only over smooth pieces, and the derivatives carry the jump term
  /// (f⁻ − f⁺) dτ (events.hpp) that makes them exact. eq and neq on the
  /// state (a switch on a set of measure zero) are refused.
  void switch_state_relations() {
    std::function<Node(const Node&, const Symbol&)> replace = [&](const Node& n,
                                                                 const Symbol& s) -> Node {
      const bool relation = n.op == Op::Lt || n.op == Op::Le || n.op == Op::Gt || n.op == Op::Ge;
      if ((n.op == Op::Eq || n.op == Op::Ne) && state_dependent(n))
        refuse(s.where, std::string("a relation ") + (n.op == Op::Eq ? "eq" : "neq") +
                            " whose operands depend on the state is not supported (a switch on a "
                            "set of measure zero), in '" + s.text + "'", s.element);
      const bool integer_part = n.kind == Node::Kind::Apply && (n.op == Op::Floor || n.op == Op::Ceil);
      if (integer_part && state_dependent(n)) {
        // ⌊g⌋ is a mode; ⌈g⌉ = −⌊−g⌋.
        Node g = replace(n.args[0], s);
        if (n.op == Op::Floor) return Node::var(floor_of(g, s.where, s.text, s.element));
        return Node::apply(Op::Neg, {Node::var(floor_of(Node::apply(Op::Neg, {std::move(g)}),
                                                        s.where, s.text, s.element))});
      }
      // In a model with events, a relation on time is a switching function
      // too: the event driver locates it, where an integration restarted at
      // each switch time would restart the events' history.
      const bool switching = state_dependent(n) || (sbml_events_ && time_dependent(n));
      if (!relation || !switching) {
        Node c = n;
        for (Node& a : c.args) a = replace(a, s);
        return c;
      }
      return Node::var(mode_of(n, s.where, s.text, s.element));
    };
    const std::size_t n = syms_.size();
    for (std::size_t i = 0; i < n; ++i) {
      Symbol& s = syms_[i];
      if (s.kind == Kind::Intermediate) s.value = replace(s.value, s);
      if (s.kind == Kind::State) s.rhs = replace(s.rhs, s);
    }
  }

  /// A new mode state (a switching function's: dm/dt = 0, StateKind::Mode)
  /// named "<prefix>N", remembered under `key`.
  std::uint32_t add_mode(const std::string& prefix, const std::string& key, Node initial,
                         const std::string& where, const std::string& text,
                         const libsbml::SBase* element) {
    Symbol mode;
    mode.id = prefix + std::to_string(modes_.size() + 1);
    while (by_id_.count(mode.id)) mode.id += "_";
    mode.what = "switch";
    mode.kind = Kind::State;
    mode.state_kind = StateKind::Mode;
    mode.rhs = Node::constant(0.0);
    mode.initial = std::move(initial);
    mode.state_dependent = true;
    mode.where = where;
    mode.text = text;
    mode.element = element;
    const std::uint32_t m = add_symbol(std::move(mode));
    modes_.emplace(key, m);
    return m;
  }

  /// One of a mode's events: when `trigger` turns true, m = value.
  void add_mode_event(std::uint32_t m, const std::string& suffix, const std::string& where,
                      const libsbml::SBase* element, Node trigger, std::string trigger_text,
                      Node value, std::string value_text) {
    EventDef d;
    d.name = syms_[m].id + suffix;
    d.label = "switching function '" + d.name + "' (of " + where + ")";
    d.element = element;
    d.trigger = std::move(trigger);
    d.trigger_text = std::move(trigger_text);
    d.assign.emplace_back(m, std::move(value));
    d.assign_text.push_back(std::move(value_text));
    events_.push_back(std::move(d));
  }

  /// The mode state of relation `n` (lt, leq, gt, geq; one per distinct
  /// relation): "switch_N", dm/dt = 0, m(t0) = n at t0 (written without
  /// comparisons), with the events n → m = 1 and not n → m = 0.
  std::uint32_t mode_of(const Node& n, const std::string& where, const std::string& text,
                        const libsbml::SBase* element) {
    const std::string key = key_of(n);
    if (auto it = modes_.find(key); it != modes_.end()) return it->second;
    const Node& a = n.args[0];
    const Node& b = n.args[1];
    Node initial;
    switch (n.op) {
      case Op::Gt: initial = positive(sub(a, b)); break;
      case Op::Lt: initial = positive(sub(b, a)); break;
      case Op::Ge: initial = sub(Node::constant(1.0), positive(sub(b, a))); break;
      default: initial = sub(Node::constant(1.0), positive(sub(a, b))); break;  // Le
    }
    const std::uint32_t m =
        add_mode("switch_", key, std::move(initial), "switching function of " + where, text, element);
    add_mode_event(m, "_on", where, element, n, "a relation in '" + text + "'",
                   Node::constant(1.0), "1");
    add_mode_event(m, "_off", where, element, Node::apply(Op::Not, {n}),
                   "not a relation in '" + text + "'", Node::constant(0.0), "0");
    return m;
  }

  /// floor(g) of a g that depends on the state, as a switching function: a
  /// mode state "floor_N" holding the integer n = ⌊g⌋ (dn/dt = 0, n(t0) =
  /// ⌊g(t0)⌋) and two events, g ≥ n + 1 → n = max(n + 1, ⌊g⌋) and g < n →
  /// n = min(n − 1, ⌊g⌋) (the max/min keep a step of one at a crossing
  /// located to round-off, ⌊g⌋ a jump of several). Between the events the
  /// right-hand side is smooth and the derivatives carry the jump terms,
  /// as for relations (mode_of).
  std::uint32_t floor_of(const Node& g, const std::string& where, const std::string& text,
                         const libsbml::SBase* element) {
    const std::string key = "floor:" + key_of(g);
    if (auto it = modes_.find(key); it != modes_.end()) return it->second;
    const Node floor_g = Node::apply(Op::Floor, {g});
    const std::uint32_t m =
        add_mode("floor_", key, floor_g, "integer part (floor) in " + where, text, element);
    const Node n = Node::var(m), up = add(n, Node::constant(1.0));
    add_mode_event(m, "_up", where, element, Node::apply(Op::Ge, {g, up}),
                   "the argument of a floor reaches n + 1 in '" + text + "'",
                   Node::apply(Op::Max, {up, floor_g}), "max(n + 1, floor(g))");
    add_mode_event(m, "_down", where, element, Node::apply(Op::Lt, {g, n}),
                   "the argument of a floor falls below n in '" + text + "'",
                   Node::apply(Op::Min, {sub(n, Node::constant(1.0)), floor_g}),
                   "min(n - 1, floor(g))");
    return m;
  }

  /// Comparisons (piecewise conditions) may depend on t and the parameters
  /// only: a state-dependent switch is a switching function
  /// (switch_state_relations) by now; this is the guard.
  void check_comparisons(const Node& n, const Symbol& s) const {
    switch (n.op) {
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
        if (state_dependent(n))
          refuse(s.where, "a piecewise (or relation) whose condition depends on the state is "
                          "not supported (only conditions on time and parameters are), in '" +
                              s.text + "'", s.element);
        return;
      default: break;
    }
    for (const Node& a : n.args) check_comparisons(a, s);
  }

  void check_discontinuities() const {
    for (const Symbol& s : syms_) {
      if (s.kind == Kind::Intermediate) check_comparisons(s.value, s);
      if (s.kind == Kind::State) check_comparisons(s.rhs, s);
    }
  }

  // ---- the result ------------------------------------------------------------

  Model assemble() {
    Model out;
    out.file = file_;
    out.id = m_->getId();
    std::vector<std::uint32_t> states, params;
    for (const char* what : {"species", "compartment", "parameter", "species reference", "switch"})
      for (std::uint32_t i = 0; i < syms_.size(); ++i)
        if (syms_[i].kind == Kind::State && syms_[i].what == what) states.push_back(i);
    for (const char* what :
         {"parameter", "compartment", "species", "species reference", "local parameter", "delay"})
      for (std::uint32_t i = 0; i < syms_.size(); ++i)
        if (syms_[i].kind == Kind::Parameter && syms_[i].what == what) params.push_back(i);
    const std::size_t ny = states.size(), np = params.size();
    std::vector<std::uint32_t> remap(syms_.size(), 0);
    for (std::size_t i = 0; i < ny; ++i) remap[states[i]] = static_cast<std::uint32_t>(1 + i);
    for (std::size_t j = 0; j < np; ++j) remap[params[j]] = static_cast<std::uint32_t>(1 + ny + j);
    for (std::size_t k = 0; k < intermediates_.size(); ++k)
      remap[intermediates_[k]] = static_cast<std::uint32_t>(1 + ny + np + k);
    std::function<Node(const Node&)> renumber = [&](const Node& n) {
      if (n.kind == Node::Kind::Variable) return Node::var(remap[n.variable]);
      Node c = n;
      for (Node& a : c.args) a = renumber(a);
      return c;
    };

    std::vector<std::string> state_names, param_names, w_names;
    for (std::uint32_t i : states) {
      const Symbol& s = syms_[i];
      state_names.push_back(s.id);
      out.state_kinds.push_back(s.state_kind);
      out.state_compartments.push_back(s.what == "species" ? s.compartment : "");
    }
    for (std::uint32_t j : params) {
      param_names.push_back(syms_[j].id);
      out.parameters.push_back(syms_[j].number);
    }
    std::vector<expr::Program> w, f;
    for (std::size_t k = 0; k < intermediates_.size(); ++k) {
      const Symbol& s = syms_[intermediates_[k]];
      w_names.push_back(s.id);
      w.push_back(expr::Program::build(renumber(s.value), 1 + ny + np + k,
                                       s.text.empty() ? s.id : s.text,
                                       located(s.element) + ": " + s.where));
    }
    const std::size_t n_all = 1 + ny + np + intermediates_.size();
    for (std::uint32_t i : states) {
      const Symbol& s = syms_[i];
      f.push_back(expr::Program::build(renumber(s.rhs), n_all, s.text.empty() ? s.where : s.text,
                                       located(s.element) + ": " + s.where));
    }
    out.state_names = state_names;
    out.parameter_names = param_names;
    out.intermediate_names = w_names;
    out.intermediates = w;
    if (ny > 0) {
      out.equations = ode::EquationModel(state_names, param_names, w_names, std::move(w),
                                         std::move(f), file_);
      std::vector<std::size_t> algebraic;
      for (std::size_t i = 0; i < ny; ++i)
        if (syms_[states[i]].algebraic) algebraic.push_back(i);
      if (!algebraic.empty()) out.equations.set_algebraic_states(std::move(algebraic));
    }
    if (!delays_.empty()) {
      const DelayDef& first = delays_.front();
      if (!events_.empty())
        refuse(first.where, "delay() in a model with events is not supported (the event driver has "
                            "no history hook for the method of steps), in '" + first.text + "'",
               first.element);
      for (std::size_t i = 0; i < ny; ++i)
        if (syms_[states[i]].algebraic)
          refuse(first.where, "delay() in a DAE (algebraic rules, fast reactions) is not "
                              "supported (the DAE integrators have no history hook for the method "
                              "of steps), in '" + first.text + "'",
                 first.element);
      for (const DelayDef& dd : delays_) {
        ode::DelayedInput in;
        in.parameter = remap[dd.slot] - 1 - ny;
        in.text = located(dd.element) + ": " + dd.where + ": " + dd.text;
        in.quantity = expr::Program::build(renumber(dd.x), n_all, dd.text, in.text);
        in.lag = expr::Program::build(renumber(dd.d), n_all, dd.text, in.text);
        // Before t0 the history is the initial one, constant in time for
        // the states rateOf reads: rateOf is 0 there (suite case 01401).
        bool reads_rate = false;
        std::function<Node(const Node&)> before = [&](const Node& n) -> Node {
          if (n.kind == Node::Kind::Variable) {
            const Symbol& v = syms_[n.variable];
            if (!v.rate_of.empty()) {
              reads_rate = true;
              return before_start_rate(v, dd);
            }
            if (v.kind == Kind::Intermediate) return before(v.value);
            return n;
          }
          Node c = n;
          for (Node& a : c.args) a = before(a);
          return c;
        };
        const Node b = before(dd.x);
        if (reads_rate)
          in.quantity_before_start = expr::Program::build(renumber(b), n_all, dd.text, in.text);
        out.delays.push_back(std::move(in));
      }
    }
    if (!events_.empty()) {
      if (ny == 0)
        refuse(events_.front().label, "the model has no state for it to change",
               events_.front().element);
      out.equations.set_events(compile_events(remap, n_all, renumber), file_ + ": events");
    }

    // Initial states over (t, parameters): substitute every other symbol.
    std::vector<int> mark(syms_.size(), 0);
    std::vector<std::optional<Node>> resolved(syms_.size());
    std::function<Node(const Node&, const std::string&)> resolve;
    auto resolve_symbol = [&](std::uint32_t i, const std::string& where) -> Node {
      const Symbol& s = syms_[i];
      if (s.kind == Kind::Time) return Node::var(0);
      // delay(x, d) at t0 is x at t0 − d with the states at their initial
      // values (the initial history; ode::DelayedInputs does the same):
      // time, directly or through intermediates, reads t − d.
      if (s.delay >= 0) {
        const DelayDef& dd = delays_[static_cast<std::size_t>(s.delay)];
        // States read their initial values at t0 − d (the initial history),
        // rateOf of them 0 (before_start).
        std::function<Node(const Node&)> shift = [&](const Node& n) -> Node {
          if (n.kind == Node::Kind::Variable) {
            const Symbol& v = syms_[n.variable];
            if (v.kind == Kind::Time) return sub(n, dd.d);
            if (!v.rate_of.empty()) return before_start_rate(v, dd);
            if (v.kind == Kind::Intermediate) return shift(v.value);
            if (v.kind == Kind::State) return shift(v.initial);
            return n;
          }
          Node c = n;
          for (Node& a : c.args) a = shift(a);
          return c;
        };
        return resolve(shift(dd.x), where);
      }
      // Parameter j is variable 1 + j of an initial value.
      if (s.kind == Kind::Parameter) return Node::var(remap[i] - static_cast<std::uint32_t>(ny));
      if (resolved[i]) return *resolved[i];
      if (mark[i] == 1)
        refuse(where, "the initial values form a cycle through '" + s.id + "'", s.element);
      mark[i] = 1;
      Node v = resolve(s.kind == Kind::State ? s.initial : s.value, where);
      mark[i] = 2;
      resolved[i] = v;
      return v;
    };
    resolve = [&](const Node& n, const std::string& where) -> Node {
      if (n.kind == Node::Kind::Variable) return resolve_symbol(n.variable, where);
      Node c = n;
      for (Node& a : c.args) a = resolve(a, where);
      return c;
    };
    std::vector<std::string> init_vars{"t"};
    init_vars.insert(init_vars.end(), param_names.begin(), param_names.end());
    for (std::uint32_t i : states) {
      const Symbol& s = syms_[i];
      const std::string where = "initial value of " + s.what + " '" + s.id + "'";
      Reading here(*this, s.element);
      Node tree = resolve_symbol(i, where);
      const expr::Program p =
          expr::Program::build(tree, 1 + np, where, located(s.element) + ": " + where);
      std::string text;
      if (p.code().size() == 1 && p.code()[0].op == Op::Constant) {
        char buf[32];
        const std::vector<double> unused(1 + np, 0.0);
        std::snprintf(buf, sizeof buf, "%.17g", p.evaluate(std::span<const double>(unused)));
        text = buf;
        tree = Node::constant(std::strtod(buf, nullptr));
      } else {
        try {
          text = expr::to_text(tree, init_vars);
        } catch (const Error& e) {
          refuse(where, std::string("cannot be an initial-state expression (") + e.what() +
                            "); piecewise and relations are not supported in initial values");
        }
      }
      out.initial_state.push_back(std::move(tree));
      out.initial_state_text.push_back(std::move(text));
    }

    // Time switches: lhs − rhs of every comparison in the right-hand side
    // that depends on time (never on the state: check_discontinuities),
    // over (t, parameters) like the initial values.
    std::function<bool(const Node&)> has_time = [&](const Node& n) {
      if (n.kind == Node::Kind::Variable) return n.variable == 0;
      for (const Node& a : n.args)
        if (has_time(a)) return true;
      return false;
    };
    std::function<void(const Node&, const std::string&)> switches = [&](const Node& n,
                                                                      const std::string& where) {
      switch (n.op) {
        case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne: {
          Node g = resolve(sub(n.args[0], n.args[1]), where);
          if (has_time(g)) out.time_switches.push_back(std::move(g));
          break;
        }
        default: break;
      }
      for (const Node& a : n.args) switches(a, where);
    };
    for (std::uint32_t k : intermediates_) switches(syms_[k].value, syms_[k].where);
    for (std::uint32_t i : states) switches(syms_[i].rhs, syms_[i].where);

    for (unsigned i = 0; i < m_->getNumSpecies(); ++i) {
      const libsbml::Species* sp = m_->getSpecies(i);
      out.species.push_back({sp->getId(), sp->getCompartment(), sp->getHasOnlySubstanceUnits()});
    }
    out.counts.species = m_->getNumSpecies();
    out.counts.reactions = m_->getNumReactions();
    out.counts.rules = m_->getNumRules();
    out.counts.initial_assignments = m_->getNumInitialAssignments();
    out.counts.functions = m_->getNumFunctionDefinitions();
    out.counts.intermediates = intermediates_.size();
    out.random_event_order = random_order_;
    return out;
  }

  std::string file_;
  std::string base_;
  const libsbml::Model* m_ = nullptr;
  mutable const libsbml::SBase* at_ = nullptr;  ///< the element being read (Reading), for refusals' lines
  std::deque<Symbol> syms_;  ///< a deque: references stay valid as rateOf adds symbols
  std::map<std::string, std::uint32_t> by_id_;
  std::map<std::string, const libsbml::Rule*> assignment_, rate_;
  std::map<std::string, const libsbml::InitialAssignment*> initial_assignment_;
  std::map<std::string, const libsbml::FunctionDefinition*> functions_;
  std::map<std::string, std::map<std::string, std::uint32_t>> local_;  ///< reaction → local → symbol
  const std::map<std::string, std::uint32_t>* locals_ = nullptr;  ///< while converting a kinetic law
  std::set<std::string> active_functions_;
  std::set<std::string> ignored_initial_assignments_;  ///< ReadOptions
  std::map<std::string, std::uint32_t> modes_;  ///< a relation's key → its mode (mode_of)
  std::vector<std::string> random_order_;  ///< competing equal-priority pairs (Model)
  bool sbml_events_ = false;  ///< the document has events (relations on time become modes)
  std::vector<std::uint32_t> intermediates_;  ///< in evaluation order
  std::vector<std::uint32_t> amount_held_;    ///< species whose amount is a state
  std::map<std::string, std::string> event_target_;  ///< symbol id → the first event assigning it
  std::map<std::string, const libsbml::SBase*> event_assignment_;  ///< … and its eventAssignment
  /// Algebraic rules with math: (index among the rules, the rule).
  std::vector<std::pair<unsigned, const libsbml::Rule*>> algebraic_rules_;
  std::map<std::string, std::size_t> algebraic_;  ///< variable id → its algebraic rule (k)
  std::vector<EventDef> events_;
  std::vector<DelayDef> delays_;
  std::map<std::string, std::uint32_t> delay_keys_;  ///< key_of(x) | key_of(d) → slot
};

}  // namespace

std::string Model::brief_report() const {
  std::ostringstream o;
  o << (id.empty() ? file : id) << ": " << counts.species << " species, " << counts.reactions
    << " reactions, " << counts.rules << " rules, " << counts.initial_assignments
    << " initial assignments, " << counts.functions << " function definitions -> "
    << state_names.size() << " states, " << parameter_names.size() << " parameters, "
    << counts.intermediates << " intermediates";
  if (!random_event_order.empty())
    o << "; events of equal priority that compete, executed in random order (seed "
      << ode::event_order_seed() << "): " << random_event_order.front()
      << (random_event_order.size() > 1
              ? " and " + std::to_string(random_event_order.size() - 1) + " more pairs"
              : std::string());
  return o.str();
}

long Model::state_index(const std::string& name) const {
  for (std::size_t i = 0; i < state_names.size(); ++i)
    if (state_names[i] == name) return static_cast<long>(i);
  return -1;
}

long Model::parameter_index(const std::string& name) const {
  for (std::size_t i = 0; i < parameter_names.size(); ++i)
    if (parameter_names[i] == name) return static_cast<long>(i);
  return -1;
}

std::vector<std::string> Model::symbol_names() const {
  std::vector<std::string> v = state_names;
  v.insert(v.end(), parameter_names.begin(), parameter_names.end());
  v.insert(v.end(), intermediate_names.begin(), intermediate_names.end());
  return v;
}

std::vector<double> Model::symbol_values(double t, std::span<const double> y,
                                         std::span<const double> p) const {
  if (!delays.empty())
    throw Error(file + ": the model has delay() (" + delays.front().text +
                "): its symbols at t need the trajectory's history, symbol_values(t, y, p, "
                "history)");
  return symbol_values_filled(t, y, p);
}

std::vector<double> Model::symbol_values_filled(double t, std::span<const double> y,
                                                std::span<const double> p) const {
  COSTATE_CHECK_EQ(y.size(), state_names.size(), file << ": symbol_values needs one value per state");
  COSTATE_CHECK_EQ(p.size(), parameter_names.size(),
                   file << ": symbol_values needs one value per parameter");
  std::vector<double> v{t};
  v.insert(v.end(), y.begin(), y.end());
  v.insert(v.end(), p.begin(), p.end());
  for (const expr::Program& w : intermediates) v.push_back(w.evaluate(std::span<const double>(v)));
  return {v.begin() + 1, v.end()};
}

std::vector<double> Model::symbol_values(double t, std::span<const double> y,
                                         std::span<const double> p,
                                         const ode::History& history) const {
  COSTATE_CHECK_EQ(p.size(), parameter_names.size(),
                   file << ": symbol_values needs one value per parameter");
  std::vector<double> q(p.begin(), p.end());
  const ode::DelayedInputs slots(state_names.size(), parameter_names.size(), intermediates, {},
                                 delays, history);
  slots.fill(t, y, q);
  return symbol_values_filled(t, y, q);
}

ode::History::Initial Model::initial_history(const std::vector<double>& p) const {
  COSTATE_CHECK_EQ(p.size(), parameter_names.size(),
                   file << ": initial_history needs one value per parameter");
  auto programs = std::make_shared<std::vector<expr::Program>>();
  for (std::size_t i = 0; i < initial_state.size(); ++i)
    programs->push_back(expr::Program::build(initial_state[i], 1 + p.size(), initial_state_text[i]));
  return [programs, p](double t, std::span<double> y) {
    std::vector<double> v{t};
    v.insert(v.end(), p.begin(), p.end());
    for (std::size_t i = 0; i < programs->size(); ++i)
      y[i] = (*programs)[i].evaluate(std::span<const double>(v));
  };
}

std::vector<double> Model::initial_values(const std::vector<double>& p, double t0) const {
  COSTATE_CHECK_EQ(p.size(), parameter_names.size(),
                   file << ": initial_values needs one value per parameter");
  std::vector<double> v{t0};
  v.insert(v.end(), p.begin(), p.end());
  std::vector<double> y;
  for (std::size_t i = 0; i < initial_state.size(); ++i)
    y.push_back(expr::Program::build(initial_state[i], v.size(), initial_state_text[i])
                    .evaluate(std::span<const double>(v)));
  return y;
}

Model read_file(const std::string& path) {
  if (!std::ifstream(path)) throw Error(path + ": cannot open the SBML file");
  io::check_xml_file_nesting(path);
  libsbml::SBMLReader reader;
  std::unique_ptr<libsbml::SBMLDocument> doc(reader.readSBMLFromFile(path));
  if (!doc) throw Error(path + ": libsbml returned no document");
  const std::string base = std::filesystem::path(path).parent_path().string();
  return Importer(path, base.empty() ? "." : base).run(*doc);
}

Model read_string(const std::string& xml, const std::string& name, const ReadOptions& options) {
  io::check_xml_nesting(xml, name);
  libsbml::SBMLReader reader;
  std::unique_ptr<libsbml::SBMLDocument> doc(reader.readSBMLFromString(xml));
  if (!doc) throw Error(name + ": libsbml returned no document");
  return Importer(name, options.base_folder.empty() ? "." : options.base_folder, options)
      .run(*doc);
}

}  // namespace costate::sbml
