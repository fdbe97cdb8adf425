"""Brute-force tandem repeats: every start, every unit length, slices compared."""


def find_repeat_brute(seq: list, min_repeats: int, max_ngram: int):
    """``(start, ngram, count)`` of the leftmost (then shortest-unit) run of ``min_repeats`` or
    more copies, ``count`` the most copies from that start; or ``None``."""
    for start in range(len(seq)):
        for n in range(1, max_ngram + 1):
            unit = seq[start:start + n]
            if len(unit) < n:
                break
            count = 1
            while seq[start + count * n:start + (count + 1) * n] == unit:
                count += 1
            if count >= min_repeats:
                return start, n, count
    return None
