#pragma once
// Definitions of BasicTape<T> members that need Reverse<T> (included at the
// end of reverse.hpp; not a public header of its own).

#include <algorithm>
#include <sstream>

namespace costate::ad {

template <class T>
void BasicTape<T>::register_input(Reverse<T>& x) {
  COSTATE_CHECK(recording_, "Tape::register_input: the tape is not recording; call "
                            "start_recording() first");
  x.set_identity(commit_statement(0), tag_);
}

template <class T>
void BasicTape<T>::register_output(Reverse<T>& x) {
  COSTATE_CHECK(recording_, "Tape::register_output: the tape is not recording");
  if (!x.is_active()) {
    // Constant output: an identifier of its own, with no dependencies.
    x.set_identity(commit_statement(0), tag_);
    return;
  }
  if (x.tag() != tag_) throw_foreign(x.index());
  T* partials = nullptr;
  std::int32_t* indices = nullptr;
  argument_cursor(1, partials, indices);
  partials[0] = T(1);
  indices[0] = x.index();
  x.set_identity(commit_statement(1), tag_);
}

template <class T>
void BasicTape<T>::throw_foreign(std::int32_t index) const {
  throw Error("AD value with tape identifier " + std::to_string(index) +
              " was recorded on another tape, or on this tape before reset(); "
              "values from different recordings cannot be mixed (re-record it, or "
              "re-register it as an input)");
}

template <class T>
void BasicTape<T>::check_statement(std::size_t n) const {
  if (n == 0) return;
  const auto& chunk = arguments_.chunks[arguments_.current];
  const T* partials = chunk.partials.get() + chunk.used;
  const std::int32_t* indices = chunk.indices.get() + chunk.used;
  for (std::size_t k = 0; k < n; ++k) {
    bool finite = true;
    if constexpr (std::is_arithmetic_v<T>) {
      finite = std::isfinite(partials[k]);
    } else {
      using std::isfinite;
      finite = isfinite(primal(partials[k]));
    }
    if (!finite) {
      std::ostringstream os;
      os.precision(16);
      os << "non-finite partial derivative in statement " << next_index_
         << " (the value with tape identifier " << next_index_ << "): argument " << k
         << " (identifier " << indices[k] << ") has partial ";
      if constexpr (std::is_arithmetic_v<T>)
        os << partials[k];
      else
        os << primal(partials[k]);
      os << "; typical causes: sqrt or cbrt at 0, log at 0, a division by zero, asin/acos at ±1";
      throw Error(os.str());
    }
  }
}

template <class T>
void BasicTape<T>::push_external_indices(std::vector<std::int32_t> inputs,
                                         std::span<Reverse<T>* const> outputs,
                                         ExternalReverse<T> reverse, ExternalTangent<T> tangent) {
  COSTATE_CHECK(recording_, "Tape::push_external: the tape is not recording");
  COSTATE_CHECK(static_cast<bool>(reverse), "Tape::push_external: a reverse callback is required");
  External e;
  e.inputs = std::move(inputs);
  e.first_output = next_index_;
  e.n_outputs = static_cast<std::int32_t>(outputs.size());
  COSTATE_CHECK(next_index_ < INT32_MAX - e.n_outputs, "tape identifier space exhausted");
  e.reverse = std::move(reverse);
  e.tangent = std::move(tangent);
  for (std::size_t k = 0; k < outputs.size(); ++k)
    outputs[k]->set_identity(next_index_ + static_cast<std::int32_t>(k), tag_);
  next_index_ += e.n_outputs;
  externals_.push_back(std::move(e));
  statements_.reserve(1);
  *statements_.cursor() = kExternal;
  ++statements_.chunks[statements_.current].used;
}

template <class T>
void BasicTape<T>::push_external(std::span<const Reverse<T>> inputs, std::span<Reverse<T>> outputs,
                                 ExternalReverse<T> reverse, ExternalTangent<T> tangent) {
  std::vector<std::int32_t> in(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].is_active() && inputs[k].tag() != tag_) throw_foreign(inputs[k].index());
    in[k] = inputs[k].index();
  }
  std::vector<Reverse<T>*> out(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) out[k] = &outputs[k];
  push_external_indices(std::move(in), out, std::move(reverse), std::move(tangent));
}

template <class T>
void BasicTape<T>::push_external(std::span<const Reverse<T>* const> inputs,
                                 std::span<Reverse<T>* const> outputs, ExternalReverse<T> reverse,
                                 ExternalTangent<T> tangent) {
  std::vector<std::int32_t> in(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k]->is_active() && inputs[k]->tag() != tag_) throw_foreign(inputs[k]->index());
    in[k] = inputs[k]->index();
  }
  push_external_indices(std::move(in), outputs, std::move(reverse), std::move(tangent));
}

template <class T>
void BasicTape<T>::evaluate(const Position& from, const Position& to) {
  COSTATE_CHECK(from.tag == tag_ && to.tag == tag_,
                "Tape::evaluate: a position belongs to another recording (the tape was reset "
                "after it was taken)");
  COSTATE_CHECK(to.next_index <= from.next_index && from.next_index <= next_index_,
                "Tape::evaluate(from, to): 'to' must not lie after 'from', and 'from' must lie "
                "within the recording");
  if (adjoints_.size() < static_cast<std::size_t>(next_index_))
    adjoints_.resize(static_cast<std::size_t>(next_index_), T(0));
  T* adj = adjoints_.data();
  std::size_t sc = from.statement_chunk, so = from.statement_offset;
  std::size_t ac = from.argument_chunk, ao = from.argument_offset;
  std::size_t ext = from.externals;
  std::int32_t idx = from.next_index;
  if (statements_.chunks.empty()) return;
  while (!(sc == to.statement_chunk && so == to.statement_offset)) {
    if (so == 0) {
      --sc;
      so = statements_.chunks[sc].used;
      continue;
    }
    const std::uint8_t* counts = statements_.chunks[sc].data.get();
    // Hot loop over the statements of this chunk.
    const std::size_t stop = sc == to.statement_chunk ? to.statement_offset : 0;
    while (so > stop) {
      const std::uint8_t n = counts[--so];
      if (n == kExternal) {
        External& e = externals_[--ext];
        idx -= e.n_outputs;
        scratch_out_.assign(adj + e.first_output, adj + e.first_output + e.n_outputs);
        std::fill(adj + e.first_output, adj + e.first_output + e.n_outputs, T(0));
        scratch_in_.assign(e.inputs.size(), T(0));
        e.reverse(std::span<const T>(scratch_out_), std::span<T>(scratch_in_));
        for (std::size_t k = 0; k < e.inputs.size(); ++k)
          if (e.inputs[k] != 0) adj[e.inputs[k]] += scratch_in_[k];
        continue;
      }
      --idx;
      if (n == 0) continue;  // an input: its adjoint is the result
      if (ao == 0) {
        --ac;
        ao = arguments_.chunks[ac].used;
      }
      ao -= n;
      const T w = adj[idx];
      if (detail::is_zero(w)) continue;
      adj[idx] = T(0);
      const T* p = arguments_.chunks[ac].partials.get() + ao;
      const std::int32_t* ix = arguments_.chunks[ac].indices.get() + ao;
      for (std::uint8_t k = 0; k < n; ++k) adj[ix[k]] += p[k] * w;
    }
  }
}

template <class T>
void BasicTape<T>::evaluate_forward() {
  if (tangents_.size() < static_cast<std::size_t>(next_index_))
    tangents_.resize(static_cast<std::size_t>(next_index_), T(0));
  T* tan = tangents_.data();
  std::int32_t idx = 1;
  std::size_t ac = 0, ao = 0, ext = 0;
  if (statements_.chunks.empty()) return;
  for (std::size_t sc = 0; sc <= statements_.current; ++sc) {
    const std::uint8_t* counts = statements_.chunks[sc].data.get();
    const std::size_t used = statements_.chunks[sc].used;
    for (std::size_t so = 0; so < used; ++so) {
      const std::uint8_t n = counts[so];
      if (n == kExternal) {
        External& e = externals_[ext++];
        COSTATE_CHECK(static_cast<bool>(e.tangent),
                      "Tape::evaluate_forward: an external function on the tape has no tangent "
                      "callback");
        scratch_in_.resize(e.inputs.size());
        for (std::size_t k = 0; k < e.inputs.size(); ++k)
          scratch_in_[k] = e.inputs[k] != 0 ? tan[e.inputs[k]] : T(0);
        scratch_out_.assign(static_cast<std::size_t>(e.n_outputs), T(0));
        e.tangent(std::span<const T>(scratch_in_), std::span<T>(scratch_out_));
        for (std::int32_t k = 0; k < e.n_outputs; ++k) tan[e.first_output + k] = scratch_out_[k];
        idx += e.n_outputs;
        continue;
      }
      if (n == 0) {
        ++idx;  // an input keeps its seeded tangent
        continue;
      }
      if (ao + n > arguments_.chunks[ac].used) {
        ++ac;
        ao = 0;
      }
      const T* p = arguments_.chunks[ac].partials.get() + ao;
      const std::int32_t* ix = arguments_.chunks[ac].indices.get() + ao;
      ao += n;
      T t = T(0);
      for (std::uint8_t k = 0; k < n; ++k) t += p[k] * tan[ix[k]];
      tan[idx++] = t;
    }
  }
}

template <class T>
TapeStats BasicTape<T>::stats() const {
  TapeStats s;
  s.statements = statements_.total();
  s.arguments = arguments_.total();
  s.externals = externals_.size();
  s.identifiers = static_cast<std::size_t>(next_index_ - 1);
  s.bytes = s.statements * sizeof(std::uint8_t) + s.arguments * (sizeof(T) + sizeof(std::int32_t)) +
            static_cast<std::size_t>(next_index_) * sizeof(T);
  s.reserved_bytes = statements_.allocated_bytes() + arguments_.allocated_bytes() +
                     adjoints_.capacity() * sizeof(T) + tangents_.capacity() * sizeof(T);
  return s;
}

}  // namespace costate::ad
