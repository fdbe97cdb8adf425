"""Slow, obviously-icefall references for the icefall compatibility switches, written from
icefall's ``beam_search.py`` as k2dec's tests need it (our code, icefall's behaviour):

- :func:`fast_beam_search_icefall`: one ``k2.RnntDecodingStreams`` over the whole padded
  batch, every stream advanced over all ``T`` frames, ``terminate_and_flush_to_streams`` and
  ``format_output(encoder_out_lens)`` with no termination frame (so the last frame only decides
  which states are final), ILME as icefall computes it (on the joiner with a zero encoder
  frame, temperature but no blank penalty).
- :func:`modified_beam_search_icefall`: the per-utterance hypothesis lists of icefall's
  ``modified_beam_search`` with float32 scores: ``log_probs + hyp.log_prob`` in float32,
  ``topk(beam)`` over all (hyp, token) pairs, equal token sequences merged with
  ``torch.logaddexp`` in float32, at the end the first hypothesis with the best
  ``log_prob / len(ys)`` (``ys`` counts the ``context_size`` initial slots).
- :func:`icefall_texts`: icefall's ``fast_beam_search_one_best`` output from such a lattice:
  the shortest path's ``aux_labels`` > 0 (``get_texts``: the labels of the graph arcs the
  lattice arcs came from, which is where a partial lattice's final arcs keep the token of
  the last frame's arc they stand for) and the frames (arc positions) they sit on.
- :func:`argmax_last`: ``k2.RaggedTensor.argmax`` (the last maximum of each row), what
  icefall's n-best methods pick with.
- :func:`oracle_icefall`: icefall's ``fast_beam_search_nbest_oracle`` / ``nbest_oracle``
  choice among n-best key sequences: ``k2.levenshtein_alignment`` of every path against its
  reference, float32 total scores, the last maximum.
"""

from __future__ import annotations

import k2
import torch


def fast_beam_search_icefall(model, encoder_out: torch.Tensor, encoder_out_lens: torch.Tensor,
                             graph: k2.Fsa, beam: float, max_states: int, max_contexts: int,
                             temperature: float = 1.0, ilme_scale: float = 0.0,
                             allow_partial: bool = False) -> k2.Fsa:
    n, t_max, _ = encoder_out.shape
    dec_model, joiner = model.decoder, model.joiner
    config = k2.RnntDecodingConfig(vocab_size=dec_model.vocab_size,
                                   decoder_history_len=dec_model.context_size, beam=beam,
                                   max_contexts=max_contexts, max_states=max_states)
    streams = k2.RnntDecodingStreams([k2.RnntDecodingStream(graph) for _ in range(n)], config)
    enc = joiner.encoder_proj(encoder_out)
    for t in range(t_max):
        shape, contexts = streams.get_contexts()
        dec = joiner.decoder_proj(dec_model(contexts.to(torch.int64), need_pad=False))
        cur = torch.index_select(enc[:, t: t + 1, :], 0, shape.row_ids(1).to(torch.int64))
        logits = joiner(cur.unsqueeze(2), dec.unsqueeze(1), project_input=False)
        logits = logits.squeeze(1).squeeze(1)
        log_probs = (logits / temperature).log_softmax(dim=-1)
        if ilme_scale != 0:
            ilme = joiner(torch.zeros_like(cur).unsqueeze(2), dec.unsqueeze(1),
                          project_input=False).squeeze(1).squeeze(1)
            log_probs = log_probs - ilme_scale * (ilme / temperature).log_softmax(dim=-1)
        streams.advance(log_probs)
    streams.terminate_and_flush_to_streams()
    return streams.format_output(encoder_out_lens.tolist(), allow_partial=allow_partial)


def icefall_texts(lattice: k2.Fsa) -> list[tuple[list[int], list[int], float]]:
    """(tokens, frames, score) per utterance of the shortest path, tokens read from
    ``aux_labels`` as icefall's ``get_texts`` does."""
    best = k2.shortest_path(lattice, use_double_scores=True)
    scores = best.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    out = []
    for u in range(best.shape[0]):
        aux = best[u].aux_labels.tolist()
        out.append(([a for a in aux if a > 0], [i for i, a in enumerate(aux) if a > 0],
                    scores[u]))
    return out


def modified_beam_search_icefall(model, encoder_out: torch.Tensor,
                                 encoder_out_lens: torch.Tensor, beam: int = 4
                                 ) -> list[tuple[list[int], float]]:
    """(tokens, float32 score) of the best hypothesis per utterance."""
    dec_model, joiner = model.decoder, model.joiner
    blank, c = dec_model.blank_id, dec_model.context_size
    out = []
    for i in range(encoder_out.size(0)):
        hyps: dict[tuple[int, ...], torch.Tensor] = {
            tuple([-1] * (c - 1) + [blank]): torch.zeros(1, dtype=torch.float32)}
        for t in range(int(encoder_out_lens[i])):
            keys = list(hyps)
            ctx = torch.tensor([list(k[-c:]) for k in keys], dtype=torch.int64)
            dec = dec_model(ctx, need_pad=False)  # [H, 1, D]
            enc = encoder_out[i, t].reshape(1, 1, 1, -1).expand(len(keys), 1, 1, -1)
            logits = joiner(enc, dec.unsqueeze(1)).reshape(len(keys), -1)
            log_probs = logits.log_softmax(dim=-1).float()
            log_probs = log_probs + torch.cat([hyps[k] for k in keys]).reshape(-1, 1)
            flat = log_probs.reshape(-1)
            top_vals, top_idx = flat.topk(min(beam, flat.numel()))
            vocab = log_probs.size(1)
            new: dict[tuple[int, ...], torch.Tensor] = {}
            for val, idx in zip(top_vals, top_idx.tolist()):
                key = keys[idx // vocab]
                tok = idx % vocab
                new_key = key if tok == blank else key + (tok,)
                score = val.reshape(1).clone()
                if new_key in new:
                    new[new_key] = torch.logaddexp(new[new_key], score)
                else:
                    new[new_key] = score
            hyps = new
        # get_most_probable(length_norm=True): log_prob / len(ys), ys with the c context slots
        best = max(hyps, key=lambda k: float(hyps[k] / len(k)))
        out.append((list(best[c:]), float(hyps[best])))
    return out


def argmax_last(scores: k2.RaggedTensor) -> torch.Tensor:
    """Per row, the index (into the values) of the last maximum; -1 for empty rows."""
    out = []
    for r, row in enumerate(scores.tolist()):
        start = int(scores.shape.row_splits(1)[r])
        if not row:
            out.append(-1)
            continue
        m = max(row)
        out.append(start + max(j for j, v in enumerate(row) if v == m))
    return torch.tensor(out, dtype=torch.int64)


def oracle_icefall(keys: list[list[list[int]]], refs: list[list[int]]) -> list[int]:
    """Per utterance, the index (over all paths, utterance after utterance) of the path of
    ``keys[utt]`` icefall's oracle picks against ``refs[utt]``; -1 without paths."""
    flat = [k for utt in keys for k in utt]
    if not flat:
        return [-1] * len(keys)
    row = torch.tensor([u for u, utt in enumerate(keys) for _ in utt], dtype=torch.int32)
    alignment = k2.levenshtein_alignment(
        refs=k2.levenshtein_graph(refs), hyps=k2.levenshtein_graph(flat), hyp_to_ref_map=row,
        sorted_match_ref=True)
    scores = alignment.get_tot_scores(use_double_scores=False, log_semiring=False)
    splits = [0]
    for utt in keys:
        splits.append(splits[-1] + len(utt))
    return argmax_last(k2.RaggedTensor(k2.ragged.create_ragged_shape2(
        row_splits=torch.tensor(splits, dtype=torch.int32), cached_tot_size=len(flat)),
        scores)).tolist()
