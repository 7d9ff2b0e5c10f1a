#pragma once
/// \file
/// sbml::Model — an SBML model read with libsbml and turned into an
/// ode::EquationModel: MathML trees go straight into expr::Program::build,
/// so a new model is ready to integrate and differentiate in milliseconds,
/// with no generated code and no compiler.
///
/// The equations (C: a species' value as its math uses it, V its
/// compartment's size, v_r reaction r's kinetic law, ν_sr its net
/// stoichiometry in r):
///     species in concentration (hasOnlySubstanceUnits = false):
///         dC/dt = (Σ_r ν_sr v_r) / V                       (V constant)
///         dC/dt = (Σ_r ν_sr v_r) / V − C (dV/dt) / V       (V with a rate rule)
///     species in amount (hasOnlySubstanceUnits = true):   dA/dt = Σ_r ν_sr v_r
///     boundary species without rules:                      dS/dt = 0
///     a species, parameter or compartment with a rate rule: dx/dt = its rule.
/// Assignment rules and kinetic laws become the model's intermediates
/// (evaluated in dependency order before the equations); function
/// definitions are expanded where they are called.
///
/// What each SBML element becomes:
/// - states: species that are neither constant nor set by an assignment
///   rule, and parameters and compartments with rate rules — named by their
///   SBML ids, in document order (species first);
/// - parameters: constant global parameters and compartments (and
///   non-constant ones that no rule changes), constant species whose stated
///   value is already in their math units, and each reaction's local
///   parameters, named "<reaction id>_<local id>" (underscores appended until
///   the name is unique);
/// - intermediates: assignment-rule variables, symbols with an initial
///   assignment that are otherwise constant (an expression of the
///   parameters), and reaction rates (named by the reaction id);
/// - initial states: the initial assignment, else initialConcentration or
///   initialAmount converted to the species' math units (× or ÷ V), else the
///   parameter's or compartment's value — each an expression of t and the
///   parameters (t = the start time), so that overriding a parameter moves
///   the initial states that depend on it.
///
/// `piecewise` whose conditions depend only on time and the parameters
/// (e.g. a stimulus switched on at t = t_on): the integrators do not stop at
/// the switch times, their step control meets the discontinuity (PEtab
/// integrates between them: time_switches). A relation (lt, leq, gt, geq)
/// of the right-hand side that depends on the state is a switching
/// function: a mode state "switch_N" (StateKind::Mode, 1 while the
/// relation holds, else 0) and two events that set it when the relation
/// turns true or false, located by the event driver; the right-hand side
/// reads the mode, so that derivatives carry the switch's jump term.
/// In a model with events a relation on time is one too (the event driver
/// locates it with the events; it is then not a time switch).
/// floor(g) of a state-dependent g is one too: a mode "floor_N" holding
/// ⌊g⌋ and two events (g ≥ n + 1, g < n); ceiling(g) = −floor(−g).
///
/// DAEs (the DAE layer's algebraic states, ode::EquationModel::
/// algebraic_states()): each algebraic rule 0 = g determines one variable
/// that nothing else determines (matched one to one; SBML's structural
/// determination, refused by name when it fails), an algebraic state with
/// g as its row of the right-hand side; a fast reaction's equilibrium
/// (its kinetic law = 0) determines a pivot species, the others of the
/// fast subsystem following from conserved amounts "<id>_total" (states).
/// Their stated values are guesses the integrator makes consistent at t0;
/// integrate with a DAE integrator (idas, bdf, …).
///
/// Also: initial assignments evaluated once at the start time and held;
/// species references as values (constant, initial assignment, rules,
/// stoichiometryMath); conversion factors; rateOf; species in
/// concentration in compartments set by assignment rules (the amount is the
/// state "<id>_amount"); the comp package flattened by libsbml; MathML
/// lowered to the expression engine (arc* family, quotient, rem, implies,
/// factorial of a constant or of a floor/ceiling). docs/sbml.md lists what
/// the SBML Test Suite checks of this.
///
/// Events (<event>) become the EquationModel's events (ode::Condition for
/// the trigger: its relations are the roots; eventAssignments, delay,
/// priority, the trigger's initialValue and persistent,
/// useValuesFromTriggerTime; Level 2 defaults initialValue = persistent =
/// true). A parameter, compartment or species that an event assigns and
/// no rule changes is a state with a zero derivative. An event that resizes
/// a compartment keeps the amounts of the species in concentration in it
/// that it does not assign (C⁺ = C⁻ V⁻ / V⁺). An event may assign a
/// species reference (a state the reactions read); a trigger without math
/// (Level 3 Version 2) never fires. A trigger holding on a window of one
/// quantity (S > 0.18 && S < 0.19) has its relations as switching functions
/// (modes, as in right-hand sides), so a window opened and closed within
/// one step fires. Events stating the same priority are executed in
/// declaration order when they commute (neither assigns what the other
/// assigns or reads). Refused by name: a trigger with eq/neq or with a
/// relation whose operands hold a piecewise, events of equal priority that
/// compete, an event assigning a constant species or an assignment-rule
/// variable, and a resized compartment holding a species in concentration
/// set by a rate rule or constant (or with a delay and values from the
/// trigger time).
///
/// Refused, with a costate::Error "file:line: element: problem" (libsbml's
/// line of the element, its id): constraints, delay in a model with events
/// or algebraic rules (and, while integrating, a lag of the right-hand side
/// that is not a positive constant), reactions without a
/// kinetic law, a required SBML Level 3 package other than comp, eq or neq
/// on the state in a right-hand side, piecewise in an initial value,
/// factorial of a value that is neither a constant nor a floor/ceiling,
/// rateOf of an assignment-rule target, an algebraic state or a fast
/// species, algebraic rules that are not structurally determined or that
/// determine every state, triggers that read an algebraic state, fast
/// reactions whose stoichiometries change in time or are dependent,
/// recursive function definitions, and the SBML id "t" (costate's name
/// for time).

#include <span>
#include <string>
#include <vector>

#include "costate/expr/program.hpp"
#include "costate/ode/equation_model.hpp"
#include "costate/ode/history.hpp"

namespace costate::sbml {

/// What a state is in SBML terms.
enum class StateKind {
  SpeciesConcentration,  ///< a species, state = its concentration
  SpeciesAmount,         ///< a species with hasOnlySubstanceUnits, state = its amount
  Parameter,             ///< a parameter with a rate rule
  Compartment,           ///< a compartment with a rate rule, state = its size
  /// A switching function's mode: 1 while a state-dependent relation of
  /// the right-hand side holds, else 0 (named "switch_N"; two events set
  /// it), or the integer part of a state-dependent floor ("floor_N").
  Mode,
};
std::string to_string(StateKind kind);

/// An imported model. Owns everything; copying is cheap next to a simulation.
struct Model {
  std::string file;      ///< the path it was read from (or the name given)
  std::string id;        ///< the SBML model's id ("" when unset)

  std::vector<std::string> state_names;   ///< SBML ids
  std::vector<StateKind> state_kinds;     ///< one per state
  /// For species states, the compartment's id ("" otherwise).
  std::vector<std::string> state_compartments;
  std::vector<std::string> parameter_names;
  std::vector<double> parameters;  ///< the SBML values, one per parameter_names

  /// Initial value of each state as a tree over the variables
  /// (t, parameters…): Variable 0 is t, Variable 1 + j is parameter j.
  std::vector<expr::Node> initial_state;
  /// The same, written in the expression grammar (expr::to_text over
  /// "t", parameter_names…); a plain number when the value is constant.
  std::vector<std::string> initial_state_text;

  /// Where the right-hand side may jump in time: for each comparison
  /// (piecewise condition or relation) of the right-hand side that depends
  /// on time, lhs − rhs as a tree over (t, parameters…) like initial_state.
  /// Its zeros in t are the switch times (petab::evaluate integrates up to
  /// each one and restarts there).
  std::vector<expr::Node> time_switches;

  /// The right-hand side; its states and parameters are the ones above.
  /// Empty (no states) when nothing in the model changes in time: the
  /// symbols are then the assignments, evaluated at each output time
  /// (symbol_values).
  ode::EquationModel equations;

  /// The intermediates in evaluation order: intermediates[k] is a program
  /// over (t, states, parameters, intermediates 0 … k−1).
  std::vector<std::string> intermediate_names;
  std::vector<expr::Program> intermediates;

  /// What the document held.
  struct Counts {
    std::size_t species = 0, reactions = 0, rules = 0, initial_assignments = 0, functions = 0,
                intermediates = 0;
  } counts;

  /// Events that state the same priority and compete (one assigns what the
  /// other assigns or reads), e.g. "event 'A' and event 'B' (priority '1')":
  /// SBML executes them in random order, and so does costate (a seeded,
  /// reproducible draw: ode::EventAttributes::
  /// random_order_among_equal_priorities), so the results depend on it.
  std::vector<std::string> random_event_order;

  /// Counts of what was read, e.g. "3 species, 2 reactions, 5 parameters, …"
  /// (and the events executed in random order, when there are).
  std::string brief_report() const;

  /// Every species of the document, in document order: what the suite's
  /// and a modeller's "amount" or "concentration" of it means.
  struct Species {
    std::string id;
    std::string compartment;  ///< its compartment's id (a symbol below)
    bool amount = false;      ///< hasOnlySubstanceUnits: its symbol is its amount
  };
  std::vector<Species> species;

  /// Every SBML symbol with a value at a time: the states, the parameters,
  /// then the intermediates (assignment-rule targets, reaction ids (their
  /// fluxes), symbols held at an initial assignment's value, …) — the
  /// variables of `equations` after t. A species is in the unit its math
  /// uses (Species::amount says which; its compartment is a symbol too).
  std::vector<std::string> symbol_names() const;
  /// Their values at (t, y, p), in the order of symbol_names().
  std::vector<double> symbol_values(double t, std::span<const double> y,
                                    std::span<const double> p) const;

  /// The same for a model with delays (`delays` not empty: the plain
  /// overload refuses it), their slots filled from the trajectory's
  /// history (ode::integrate_with_delays' Solution::history; for a
  /// model without states a history with one node at the start time).
  std::vector<double> symbol_values(double t, std::span<const double> y,
                                    std::span<const double> p,
                                    const ode::History& history) const;

  /// delay(x, d) in the math: each distinct one is a parameter slot named
  /// by its formula ("delay(x, 0.2)", value NaN in `parameters`) that
  /// ode::DelayedInputs fills with x(t − d) from the history — x at the
  /// start time while t − d is before it (in an initial assignment,
  /// evaluated at t0, delay(x, d) is x). Integrate such a model with
  /// ode::integrate_with_delays (the method of steps; lags the right-hand
  /// side reads must be positive constants); models with delays and events
  /// or algebraic rules are refused by name, and gradients through delay()
  /// are not supported.
  std::vector<ode::DelayedInput> delays;

  /// Index of a state or parameter by SBML id (or local "<reaction>_<id>"
  /// name); -1 when absent.
  long state_index(const std::string& name) const;
  long parameter_index(const std::string& name) const;
  /// Initial states at `p` (one per parameter_names), time `t0`.
  std::vector<double> initial_values(const std::vector<double>& p, double t0 = 0.0) const;
  /// The states' history before the start time (ode::History::set_initial):
  /// their initial values, formulas of t and the parameters, at τ < t0 —
  /// SBML's reading of an initial assignment in time ("x has been
  /// oscillating up to the start", suite case 00941).
  ode::History::Initial initial_history(const std::vector<double>& p) const;

 private:
  std::vector<double> symbol_values_filled(double t, std::span<const double> y,
                                           std::span<const double> p) const;
};

/// How a document is read beyond the specification's defaults.
struct ReadOptions {
  /// Parameter and compartment ids whose initial assignments are ignored,
  /// because the caller sets their values (PEtab: a condition-table column
  /// overrides the model's initial assignment of that id). The symbol is
  /// then a parameter at its stated value (NaN when it states none), which
  /// the caller replaces. (A species keeps its assignment: its initial
  /// state is what a caller overrides.)
  std::vector<std::string> ignore_initial_assignments{};
  /// The folder a comp externalModelDefinition's relative `source` is read
  /// from (read_file: the document's own folder; read_string: this, else
  /// the working folder).
  std::string base_folder{};
};

/// Reads an SBML file (any level/version libsbml reads). Throws
/// costate::Error naming the file on read errors (with libsbml's line and
/// message) and on every unsupported element (see the file comment).
/// comp external model definitions are read from files next to it.
Model read_file(const std::string& path);
/// The same from a document in memory; `name` stands for the file in errors.
Model read_string(const std::string& xml, const std::string& name = "<sbml string>",
                  const ReadOptions& options = {});

}  // namespace costate::sbml
