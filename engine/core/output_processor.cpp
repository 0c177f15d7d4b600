#include "engine/core/output_processor.h"

#include <algorithm>

namespace minfer {

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, Scheduler& scheduler, BlockManager& blocks,
                                 std::vector<int32_t> eos_ids, Limits limits, int64_t& next_sequence_id,
                                 ParkedKVTable& parked, double park_seconds)
    : tokenizer_(tokenizer),
      scheduler_(scheduler),
      blocks_(blocks),
      eos_ids_(std::move(eos_ids)),
      limits_(limits),
      next_sequence_id_(next_sequence_id),
      parked_(parked),
      park_seconds_(park_seconds) {}

void OutputProcessor::moved(Request& r) {
    if (std::find(moved_.begin(), moved_.end(), &r) == moved_.end()) moved_.push_back(&r);
}

void OutputProcessor::process(const StepInputs& in, std::span<const int32_t> sampled, std::span<const float> logits) {
    const size_t vocab = size_t(limits_.vocab_size);
    const std::function<const float*(size_t)> logits_of = [&](size_t use) -> const float* {
        return in.needs_logits ? logits.data() + use * vocab : nullptr;
    };
    for (size_t i = in.num_samples; i < in.uses.size(); ++i) {
        Request& r = *in.uses[i].seq->request;
        const int32_t p = in.uses[i].prompt_position;
        r.prompt_logprobs.push_back(logprob_of(logits_of(i), limits_.vocab_size, r.prompt[p + 1], r.options.logprobs));
    }
    // Samples k > 0 of a fresh prompt first: each a copy of sample 0 that shares its blocks.
    for (size_t i = 0; i < in.num_samples; ++i) {
        Sequence& seq = *in.uses[i].seq;
        if (seq.forks_on_first_sample() && in.uses[i].sample_stream > 0)
            append_token(fork(seq, in.uses[i].sample_stream), sampled[i], logits_of(i));
    }
    for (size_t i = 0; i < in.num_samples; ++i) {
        Sequence& seq = *in.uses[i].seq;
        if (in.uses[i].sample_stream != seq.sample_index || in.uses[i].spec_row != 0) continue;
        if (seq.draft_tokens.empty())
            append_token(seq, sampled[i], logits_of(i));
        else
            append_verified(seq, sampled, i, logits_of);
    }
}

// Rows first .. first + k verified drafts 0 .. k - 1 (and drew the token after them).
void OutputProcessor::append_verified(Sequence& seq, std::span<const int32_t> sampled, size_t first,
                                      const std::function<const float*(size_t)>& logits_of) {
    const std::vector<int32_t> drafts = std::move(seq.draft_tokens);
    seq.draft_tokens.clear();
    seq.draft_probs.clear();
    const int32_t k = int32_t(drafts.size());
    const int32_t accepted = accepted_prefix(drafts.data(), sampled.data() + first, k);
    spec_stats_.record(k, accepted);
    // The step computed the K/V of the last token and of every draft; those of
    // the accepted drafts stay: each accepted draft is a computed token.
    for (int32_t d = 0; d <= accepted && !seq.finished(); ++d) {
        append_token(seq, sampled[first + size_t(d)], logits_of(first + size_t(d)));
        if (d < accepted) ++seq.num_computed;
    }
    if (seq.finished()) return;  // its blocks are back in the pool
    blocks_.commit(seq.blocks, seq.tokens, seq.num_computed);
    blocks_.truncate(seq.blocks, seq.num_computed);  // the rejected drafts' slots
    seq.draft_computed = std::min(seq.draft_computed, seq.num_computed);  // a draft model's K/V of rejected drafts
}

Sequence& OutputProcessor::fork(Sequence& first, int32_t sample_index) {
    Request& r = *first.request;
    std::unique_ptr<Sequence> child = make_sequence(r, sample_index, next_sequence_id_++, tokenizer_);
    child->num_computed = first.num_computed;
    child->num_charged = first.num_charged;
    child->blocks = blocks_.fork(first.blocks);
    if (first.constraint) child->constraint = std::make_unique<grammar::Constraint>(*first.constraint);
    scheduler_.add_running(child.get());
    r.seqs.push_back(std::move(child));
    return *r.seqs.back();
}

void OutputProcessor::finish(Sequence& seq, const std::string& reason) {
    if (reason == "length") seq.out.text += seq.out.detokenizer->flush();
    seq.out.finish_reason = reason;
    if (reason != "abort" && seq.sample_index == 0 && !seq.request->options.kv_send_id.empty()) park_prompt(seq);
    scheduler_.remove(&seq);
    seq.status = SequenceStatus::Finished;
}

// A prefill instance's request has its first token: the prompt's blocks (all
// computed) wait for the KV sender instead of going back to the pool.
void OutputProcessor::park_prompt(Sequence& seq) {
    if (seq.num_computed < seq.num_prompt_tokens) return;
    ParkedKV kv;
    kv.tokens.assign(seq.tokens.begin(), seq.tokens.begin() + seq.num_prompt_tokens);
    blocks_.truncate(seq.blocks, seq.num_prompt_tokens);
    kv.blocks = std::move(seq.blocks);
    seq.blocks = {};
    kv.outgoing = true;
    kv.expires = steady_seconds() + park_seconds_;
    parked_.park(seq.request->options.kv_send_id, std::move(kv));
}

// A new token for `seq`: logprobs, text, and every stop condition.
void OutputProcessor::append_token(Sequence& seq, int32_t token, const float* logits) {
    const GenerationOptions& o = seq.request->options;
    OutputState& out = seq.out;
    seq.tokens.push_back(token);
    ++generation_tokens_;
    if (o.logprobs >= 0) out.logprobs.push_back(logprob_of(logits, limits_.vocab_size, token, o.logprobs));

    const bool may_stop = seq.num_output() > o.min_tokens || o.min_tokens == 0;
    const bool is_eos = !o.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
    const bool is_stop_id = std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), token) != o.stop_token_ids.end();
    // The grammar allowed this token (PlanBuilder's mask) unless it allowed
    // none: no token of the vocabulary continues the text, and it is not
    // whole. Then the text ends where it is, as cut short ("length").
    if (seq.constraint && ((is_eos || is_stop_id) ? !seq.constraint->accepting() : !seq.constraint->accept(token))) {
        finish(seq, "length");
        return;
    }
    if (may_stop && (is_eos || is_stop_id)) {
        if (is_stop_id) out.stop_token = token;
        finish(seq, "stop");  // the stop token's own text is not part of the output
        return;
    }
    const size_t before = out.text.size();
    out.text += out.detokenizer->push(token);
    if (may_stop && !o.stop.empty()) {
        const size_t longest = seq.request->longest_stop();
        // A stop string ends inside the new text: search from where it could start.
        const size_t from = before >= longest ? before - longest + 1 : 0;
        size_t cut = std::string::npos;
        for (const std::string& s : o.stop) {
            const size_t at = out.text.find(s, from);
            if (at != std::string::npos && at < cut) {
                cut = at;
                out.stop_string = s;
            }
        }
        if (cut != std::string::npos) {
            out.text.resize(cut);
            finish(seq, "stop");
            return;
        }
    }
    if (seq.constraint && seq.constraint->can_only_end()) {
        finish(seq, "stop");
        return;
    }
    if (seq.num_output() >= o.max_tokens || seq.num_tokens() >= limits_.max_model_len) finish(seq, "length");
}

std::vector<RequestOutput> OutputProcessor::collect(RequestMap& requests) {
    std::vector<RequestOutput> outputs;
    for (Request* r : moved_) {
        outputs.push_back(news_of(*r));
        if (outputs.back().finished) requests.erase(r->id);
    }
    moved_.clear();
    return outputs;
}

// The request's news since its last output.
RequestOutput OutputProcessor::news_of(Request& r) {
    RequestOutput news;
    news.request_id = r.id;
    news.num_prompt_tokens = static_cast<int32_t>(r.prompt.size());
    news.prompt_logprobs.assign(r.prompt_logprobs.begin() + long(r.prompt_logprobs_sent), r.prompt_logprobs.end());
    r.prompt_logprobs_sent = r.prompt_logprobs.size();
    bool all_finished = int32_t(r.seqs.size()) == r.options.n || r.aborted;
    const size_t longest_stop = r.longest_stop();
    for (auto& seq_ptr : r.seqs) {
        Sequence& seq = *seq_ptr;
        OutputState& out = seq.out;
        all_finished &= seq.finished();
        // Hold back text that could be the start of a stop string.
        size_t ready = out.text.size();
        if (!seq.finished() && longest_stop > 0)
            ready = std::max(out.text_sent, ready >= longest_stop - 1 ? ready - (longest_stop - 1) : 0);
        const size_t generated = static_cast<size_t>(seq.num_output());
        const bool news_here =
            ready > out.text_sent || generated > out.tokens_sent || (seq.finished() && !out.finish_sent);
        if (!news_here) continue;
        SampleOutput so;
        so.index = seq.sample_index;
        so.token_ids.assign(seq.tokens.begin() + seq.num_prompt_tokens + long(out.tokens_sent), seq.tokens.end());
        so.text = out.text.substr(out.text_sent, ready - out.text_sent);
        so.logprobs.assign(out.logprobs.begin() + long(out.logprobs_sent), out.logprobs.end());
        if (seq.finished()) {
            so.finish_reason = out.finish_reason;
            so.stop_string = out.stop_string;
            so.stop_token = out.stop_token;
            out.finish_sent = true;
        }
        out.tokens_sent = generated;
        out.text_sent = ready;
        out.logprobs_sent = out.logprobs.size();
        news.samples.push_back(std::move(so));
    }
    news.finished = all_finished;
    if (!r.queue_time_sent && r.first_scheduled_time >= 0) {
        news.queue_seconds = r.first_scheduled_time - r.arrival_time;
        r.queue_time_sent = true;
    }
    return news;
}

}  // namespace minfer
