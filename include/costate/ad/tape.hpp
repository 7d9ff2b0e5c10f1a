#pragma once
/// \file
/// ad::BasicTape<T> — the Jacobian tape of reverse mode (ad::Tape =
/// BasicTape<double>).
///
/// Each recorded statement  w = φ(u_1, …, u_n)  stores its n local partials
/// ∂φ/∂u_k and the identifiers of the u_k; expression templates (reverse.hpp)
/// fold a whole C++ expression into one statement. The reverse sweep runs the
/// statements backwards:
///
///     ū_k += (∂φ/∂u_k) · w̄     for every argument,   then  w̄ = 0,
///
/// so adjoints of the inputs accumulate over sweeps (several losses,
/// mini-batches) until clear_adjoints(); intermediate adjoints are consumed.
/// Identifiers are handed out linearly — statement k of the tape defines
/// identifier k + 1 — so a statement stores only its argument count (one
/// byte) and its arguments (partial + 32-bit identifier). Storage grows in
/// large chunks, never per operation, and is kept for reuse by reset().
///
/// External functions put a whole operation (a linear solve, a time step, a
/// user's hand-written adjoint) on the tape as one node: its inputs, its
/// outputs and a reverse callback (optional tangent callback) that captures
/// whatever data it saved. See ExternalFunction.
///
/// One tape per thread and scalar type: BasicTape<T>::active(). Not
/// thread-safe across threads (each thread records its own tape).
///
/// Limits: at most 2³¹ − 1 identifiers per recording; at most 254 active
/// arguments per statement (the expression templates split nothing: an
/// expression with more distinct active leaves does not compile).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "costate/core/error.hpp"

namespace costate::ad {

template <class T>
class Reverse;

/// A point on a tape, for reset(position) and evaluate(from, to).
struct Position {
  std::size_t statement_chunk = 0, statement_offset = 0;
  std::size_t argument_chunk = 0, argument_offset = 0;
  std::size_t externals = 0;
  std::int32_t next_index = 1;
  std::uint32_t tag = 0;

  friend bool operator==(const Position&, const Position&) = default;
};

/// Size of a recording.
struct TapeStats {
  std::size_t statements = 0;   ///< recorded statements (inputs included)
  std::size_t arguments = 0;    ///< stored (partial, identifier) pairs
  std::size_t externals = 0;    ///< external-function nodes
  std::size_t identifiers = 0;  ///< identifiers handed out
  std::size_t bytes = 0;        ///< memory the recording occupies (statements + arguments + adjoints)
  std::size_t reserved_bytes = 0;  ///< memory the tape holds (chunks kept for reuse)
  std::string report() const;
};

/// The reverse callback of an external function: reads the adjoints of its
/// outputs (ȳ) and adds its contribution to the adjoints of its inputs
/// (x̄ += (∂y/∂x)ᵀ ȳ). `input_adjoints` arrives zeroed; entries of passive
/// inputs are ignored.
template <class T>
using ExternalReverse = std::function<void(std::span<const T> output_adjoints,
                                           std::span<T> input_adjoints)>;
/// The tangent callback: ẏ = (∂y/∂x) ẋ.
template <class T>
using ExternalTangent =
    std::function<void(std::span<const T> input_tangents, std::span<T> output_tangents)>;

namespace detail {

/// A sequence of equal-size chunks that never moves its elements.
template <class E>
class ChunkList {
 public:
  explicit ChunkList(std::size_t chunk) : chunk_(chunk) {}
  struct Chunk {
    std::unique_ptr<E[]> data;
    std::size_t used = 0;
  };
  std::vector<Chunk> chunks;
  std::size_t current = 0;  // chunk being written
  std::size_t chunk_size() const { return chunk_; }

  /// Makes room for n contiguous elements in the current chunk.
  void reserve(std::size_t n) {
    if (chunks.empty()) [[unlikely]]
      add();
    if (chunks[current].used + n > chunk_) [[unlikely]] {
      ++current;
      if (current == chunks.size()) add();
      chunks[current].used = 0;
    }
  }
  E* cursor() { return chunks[current].data.get() + chunks[current].used; }
  std::size_t total() const {
    std::size_t t = 0;
    for (std::size_t c = 0; c <= current && c < chunks.size(); ++c) t += chunks[c].used;
    return t;
  }
  std::size_t allocated_bytes() const { return chunks.size() * chunk_ * sizeof(E); }

 private:
  void add() { chunks.push_back(Chunk{std::unique_ptr<E[]>(new E[chunk_]), 0}); }
  std::size_t chunk_;
};

/// Statement arguments in chunks, as two parallel arrays (partials and
/// identifiers: 12 bytes an argument for double, no padding).
template <class T>
class ArgumentChunks {
 public:
  explicit ArgumentChunks(std::size_t chunk) : chunk_(chunk) {}
  struct Chunk {
    std::unique_ptr<T[]> partials;
    std::unique_ptr<std::int32_t[]> indices;
    std::size_t used = 0;
  };
  std::vector<Chunk> chunks;
  std::size_t current = 0;

  void reserve(std::size_t n) {
    if (chunks.empty()) [[unlikely]]
      add();
    if (chunks[current].used + n > chunk_) [[unlikely]] {
      ++current;
      if (current == chunks.size()) add();
      chunks[current].used = 0;
    }
  }
  T* partials() { return chunks[current].partials.get() + chunks[current].used; }
  std::int32_t* indices() { return chunks[current].indices.get() + chunks[current].used; }
  std::size_t total() const {
    std::size_t t = 0;
    for (std::size_t c = 0; c <= current && c < chunks.size(); ++c) t += chunks[c].used;
    return t;
  }
  std::size_t allocated_bytes() const {
    return chunks.size() * chunk_ * (sizeof(T) + sizeof(std::int32_t));
  }

 private:
  void add() {
    chunks.push_back(Chunk{std::unique_ptr<T[]>(new T[chunk_]),
                           std::unique_ptr<std::int32_t[]>(new std::int32_t[chunk_]), 0});
  }
  std::size_t chunk_;
};

std::uint32_t next_tape_tag();

}  // namespace detail

template <class T>
class BasicTape {
 public:
  /// Argument count that marks an external-function node.
  static constexpr std::uint8_t kExternal = 255;
  static constexpr std::size_t kMaxArguments = 254;

  BasicTape() : tag_(detail::next_tape_tag()) {}
  BasicTape(const BasicTape&) = delete;
  BasicTape& operator=(const BasicTape&) = delete;

  /// The tape this thread records on for scalar type T: the thread's own
  /// tape, unless a ScopedTape has made another one active.
  static BasicTape& active() {
    BasicTape* t = current_;
    if (t == nullptr) [[unlikely]]
      t = current_ = &own();
    return *t;
  }
  /// Makes `tape` this thread's active tape until the scope ends (nested
  /// recordings: a solver that tapes its own small functions without
  /// touching the caller's recording).
  class Scope {
   public:
    explicit Scope(BasicTape& tape) : previous_(&active()) { current_ = &tape; }
    ~Scope() { current_ = previous_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    BasicTape* previous_;
  };

  void start_recording() { recording_ = true; }
  void stop_recording() { recording_ = false; }
  bool is_recording() const { return recording_; }

  /// Makes x an independent variable of the recording (gives it a fresh
  /// identifier). Only while recording.
  void register_input(Reverse<T>& x);
  /// Marks x as an output: gives it an identifier of its own (a copy
  /// statement), so that seeding it seeds only it.
  void register_output(Reverse<T>& x);

  Position position() const {
    Position p;
    if (!statements_.chunks.empty()) {
      p.statement_chunk = statements_.current;
      p.statement_offset = statements_.chunks[statements_.current].used;
    }
    if (!arguments_.chunks.empty()) {
      p.argument_chunk = arguments_.current;
      p.argument_offset = arguments_.chunks[arguments_.current].used;
    }
    p.externals = externals_.size();
    p.next_index = next_index_;
    p.tag = tag_;
    return p;
  }

  /// Forgets the whole recording (memory is kept). Values recorded before
  /// become invalid on this tape: using them as arguments is an error.
  void reset() {
    reset_streams();
    externals_.clear();
    next_index_ = 1;
    std::fill(adjoints_.begin(), adjoints_.end(), T(0));
    tag_ = detail::next_tape_tag();
  }

  /// Forgets the statements recorded after `p` (a position of this
  /// recording); adjoints of identifiers below p stay (mini-batches).
  void reset(const Position& p) {
    COSTATE_CHECK(p.tag == tag_, "Tape::reset(position): the position belongs to another "
                                 "recording (the tape was reset after it was taken)");
    COSTATE_CHECK(p.next_index <= next_index_,
                  "Tape::reset(position): the position lies after the end of the recording");
    if (!statements_.chunks.empty()) {
      statements_.current = p.statement_chunk;
      statements_.chunks[p.statement_chunk].used = p.statement_offset;
    }
    if (!arguments_.chunks.empty()) {
      arguments_.current = p.argument_chunk;
      arguments_.chunks[p.argument_chunk].used = p.argument_offset;
    }
    externals_.resize(p.externals);
    for (std::size_t i = static_cast<std::size_t>(p.next_index);
         i < adjoints_.size() && i < static_cast<std::size_t>(next_index_); ++i)
      adjoints_[i] = T(0);
    next_index_ = p.next_index;
  }

  /// Reverse sweep over the whole recording.
  void evaluate() { evaluate(position(), Position{0, 0, 0, 0, 0, 1, tag_}); }
  /// Reverse sweep over the statements between `to` (earlier) and `from`.
  void evaluate(const Position& from, const Position& to);
  /// Forward (tangent) sweep over the whole recording: with the inputs'
  /// tangents set by set_tangent, every identifier's tangent
  /// ẇ = Σ_k (∂φ/∂u_k) u̇_k. Read with tangent().
  void evaluate_forward();

  /// Sets every adjoint to zero.
  void clear_adjoints() { std::fill(adjoints_.begin(), adjoints_.end(), T(0)); }

  /// Adjoint of an identifier (0 for passive identifier 0).
  T gradient(std::int32_t index) const {
    return index > 0 && static_cast<std::size_t>(index) < adjoints_.size() ? adjoints_[index]
                                                                            : T(0);
  }
  T& gradient_ref(std::int32_t index) {
    COSTATE_CHECK(index > 0, "cannot seed or read the adjoint of a passive value (it was not "
                             "registered as an input and does not depend on one)");
    COSTATE_CHECK_LT(index, next_index_, "adjoint identifier beyond the recording");
    if (adjoints_.size() < static_cast<std::size_t>(next_index_))
      adjoints_.resize(static_cast<std::size_t>(next_index_), T(0));
    return adjoints_[index];
  }
  /// Tangents (evaluate_forward).
  void set_tangent(std::int32_t index, T value) {
    COSTATE_CHECK(index > 0, "cannot seed the tangent of a passive value");
    if (tangents_.size() < static_cast<std::size_t>(next_index_))
      tangents_.resize(static_cast<std::size_t>(next_index_), T(0));
    tangents_[index] = value;
  }
  T tangent(std::int32_t index) const {
    return index > 0 && static_cast<std::size_t>(index) < tangents_.size() ? tangents_[index]
                                                                            : T(0);
  }
  void clear_tangents() { std::fill(tangents_.begin(), tangents_.end(), T(0)); }

  /// Records an external function: `inputs` are its arguments (passive ones
  /// allowed), `outputs` receive fresh identifiers (their values must already
  /// be set by the caller). The callbacks own whatever data they captured.
  void push_external(std::span<const Reverse<T>> inputs, std::span<Reverse<T>> outputs,
                     ExternalReverse<T> reverse, ExternalTangent<T> tangent = {});
  /// The same with inputs given by pointer (for non-contiguous arguments).
  void push_external(std::span<const Reverse<T>* const> inputs, std::span<Reverse<T>* const> outputs,
                     ExternalReverse<T> reverse, ExternalTangent<T> tangent = {});

  /// Opt-in: check every recorded partial; the first non-finite one throws
  /// costate::Error naming the statement (identifier) and argument.
  void set_check_finite(bool on) { check_finite_ = on; }
  bool check_finite() const { return check_finite_; }

  TapeStats stats() const;

  // ---- used by Reverse<T> and the expression templates ------------------
  std::uint32_t tag() const { return tag_; }
  /// Room for a statement with up to n arguments; where to write them.
  void argument_cursor(std::size_t n, T*& partials, std::int32_t*& indices) {
    arguments_.reserve(n);
    partials = arguments_.partials();
    indices = arguments_.indices();
  }
  /// Commits a statement whose n arguments were written at the cursor;
  /// returns the identifier of its result.
  std::int32_t commit_statement(std::size_t n) {
    if (n > 0) {  // inputs (n = 0) may come before any argument chunk exists
      if (check_finite_) [[unlikely]]
        check_statement(n);
      arguments_.chunks[arguments_.current].used += n;
    }
    statements_.reserve(1);
    *statements_.cursor() = static_cast<std::uint8_t>(n);
    ++statements_.chunks[statements_.current].used;
    if (next_index_ == INT32_MAX) [[unlikely]]
      throw_exhausted();
    return next_index_++;
  }
  [[noreturn, gnu::cold]] void throw_exhausted() const {
    throw Error("tape identifier space exhausted (2^31 - 1 values in one recording)");
  }
  [[noreturn]] void throw_foreign(std::int32_t index) const;

 private:
  struct External {
    std::vector<std::int32_t> inputs;
    std::int32_t first_output = 0;
    std::int32_t n_outputs = 0;
    ExternalReverse<T> reverse;
    ExternalTangent<T> tangent;
  };

  void reset_streams() {
    if (!statements_.chunks.empty()) {
      statements_.current = 0;
      statements_.chunks[0].used = 0;
    }
    if (!arguments_.chunks.empty()) {
      arguments_.current = 0;
      arguments_.chunks[0].used = 0;
    }
  }
  void check_statement(std::size_t n) const;
  void push_external_indices(std::vector<std::int32_t> inputs, std::span<Reverse<T>* const> outputs,
                             ExternalReverse<T> reverse, ExternalTangent<T> tangent);

  static BasicTape& own() {
    thread_local BasicTape tape;
    return tape;
  }
  static inline thread_local BasicTape* current_ = nullptr;

  detail::ChunkList<std::uint8_t> statements_{1u << 22};
  detail::ArgumentChunks<T> arguments_{1u << 20};
  std::vector<External> externals_;
  std::vector<T> adjoints_;
  std::vector<T> tangents_;
  std::vector<T> scratch_out_, scratch_in_;
  std::int32_t next_index_ = 1;
  std::uint32_t tag_;
  bool recording_ = false;
  bool check_finite_ = false;
};

/// The tape of ad::Real = Reverse<double>.
using Tape = BasicTape<double>;

}  // namespace costate::ad
