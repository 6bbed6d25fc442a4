"""Compiled hot loops (Numba): the window scan, the seeded ZStream search, the SES automaton.

One generic kernel per algorithm, compiled once per machine (``cache=True``) and driven by
integer tables from ``CompiledPattern``: no code is generated from a pattern file. Values
are the encoded columns of ``EventColumns`` (float64 value + int8 kind per attribute).

Status codes returned by the matcher kernels: ``DONE`` (every window processed),
``FULL`` (the output buffers are full: resume at the returned window), ``CAP`` (a window
exceeded the cap on work items: the returned window names it); ``kernel_codes`` holds
them. ``aot`` compiles the entry points ahead of time into an extension module; this module
is the source of both and the just-in-time fallback.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from jobs.core.engine import kernel_codes as codes
from jobs.core.engine.kernel_codes import compare

# int constants as typed numpy scalars: Numba's ahead-of-time compiler types a Python int
# global as a literal and then cannot assign another value to a variable that held it
DONE, FULL, CAP, BUDGET = (np.int64(c) for c in (codes.DONE, codes.FULL, codes.CAP,
                                                  codes.BUDGET))

_LEVEL, _EXT = np.int64(0), np.int64(1)
_I64_MIN = np.int64(np.iinfo(np.int64).min)
_I64_MAX = np.int64(np.iinfo(np.int64).max)


cmp = njit(cache=True, inline="always")(compare)


@njit(cache=True, inline="always")
def _lower(a, lo, hi, x):
    """First position p in [lo, hi) with a[p] >= x (a sorted)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _upper(a, lo, hi, x):
    """First position p in [lo, hi) with a[p] > x (a sorted)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------------------
# Programs: conditions that are not one comparison (``programs.Programs``)
# ------------------------------------------------------------------------------------
# ``ex``, the extras tuple every matcher kernel takes (``engine.Matcher.extras``):
#  0 vmin, 1 vmax (Kleene bounds per variable), 2 pos (contiguity positions), 3 contig,
#  4 code, 5 program ptr, 6 constant values, 7 constant kinds, 8-9 stack scratch,
#  10-12 program relationship rows (ptr, other variable, program), 13-14 program prev
#  rows per variable (ptr, program), 15 the fourth step's tables packed in one int64 array
#  (``runtime.features``; one array, not six: the tuple is copied at every event the
#  automaton steps): a header of offsets (F_*), each variable's consecutive-rank row (-1:
#  none), per variable the range of its running conditions, each one's program, the range
#  of its aggregates, the aggregates (constant slot, function, attribute row or -1), and
#  the ranks of the consecutive groups' events among the events that fit them.
# the header of ``ex[15]``: the number of events, then where each table starts
F_N, F_RANK_OF, F_RPTR, F_RPROG, F_APTR, F_AGGS, F_RANKS = range(7)


@njit(cache=True)
def run_program(code, lo, hi, cval, ckind, vals, kinds, e0, e1, sv, sk):
    """Whether program ``code[lo:hi]`` is true for event e0 in slot 0 and e1 in slot 1
    (three-valued: unknown is not true; see ``conditions.truth``)."""
    top = 0
    for c in range(lo, hi):
        op = code[c, 0]
        a = code[c, 1]
        if op == 0:
            e = e0 if a == 0 else e1
            sv[top] = vals[code[c, 2], e]
            sk[top] = kinds[code[c, 2], e]
            top += 1
        elif op == 1:
            sv[top] = cval[a]
            sk[top] = ckind[a]
            top += 1
        elif op == 2:
            top -= 1
            x = sv[top - 1]
            y = sv[top]
            if sk[top - 1] == 1 and sk[top] == 1 and not (a == 3 and y == 0.0):
                if a == 0:
                    r = x + y
                elif a == 1:
                    r = x - y
                elif a == 2:
                    r = x * y
                else:
                    r = x / y
                if np.isfinite(r):
                    sv[top - 1] = r
                else:
                    sk[top - 1] = 0
            else:
                sk[top - 1] = 0
        elif op == 3:
            if sk[top - 1] == 1:
                sv[top - 1] = -sv[top - 1]
            else:
                sk[top - 1] = 0
        elif op == 4:
            top -= 1
            lk = sk[top - 1]
            rk = sk[top]
            if lk == 0 or rk == 0:
                sk[top - 1] = 0
            elif lk != rk:
                if a == 0 or a == 1:
                    sk[top - 1] = 3
                    sv[top - 1] = 1.0 if a == 1 else 0.0
                else:
                    sk[top - 1] = 0
            else:
                sk[top - 1] = 3
                sv[top - 1] = 1.0 if cmp(a, sv[top - 1], 1, sv[top], 1) else 0.0
        elif op == 5:
            if sk[top - 1] == 3:
                sv[top - 1] = 1.0 - sv[top - 1]
        else:
            top -= 1
            x_known = sk[top - 1] == 3
            y_known = sk[top] == 3
            x = sv[top - 1]
            y = sv[top]
            dominant = 0.0 if op == 6 else 1.0  # and: false wins; or: true wins
            if (x_known and x == dominant) or (y_known and y == dominant):
                sk[top - 1] = 3
                sv[top - 1] = dominant
            elif x_known and y_known:
                sk[top - 1] = 3
                sv[top - 1] = 1.0 - dominant
            else:
                sk[top - 1] = 0
    return sk[0] == 3 and sv[0] == 1.0


@njit(cache=True)
def program_column(code, lo, hi, cval, ckind, vals, kinds, depth):
    """A program on every event in slot 0 (tests compare it with the reference)."""
    n = vals.shape[1]
    out = np.zeros(n, np.bool_)
    sv = np.empty(depth, np.float64)
    sk = np.empty(depth, np.int8)
    for e in range(n):
        out[e] = run_program(code, lo, hi, cval, ckind, vals, kinds, e, e, sv, sk)
    return out


@njit(cache=True, inline="always")
def _xrels_ok(e, v, vals, kinds, ex, bst_ev, bst_var, nb):
    """The program relationships of ``v`` for event e against every bound event."""
    xptr = ex[10]
    for r in range(xptr[v], xptr[v + 1]):
        w = ex[11][r]
        p = ex[12][r]
        for k in range(nb):
            if bst_var[k] == w:
                if not run_program(ex[4], ex[5][p], ex[5][p + 1], ex[6], ex[7], vals, kinds,
                                   e, bst_ev[k], ex[8], ex[9]):
                    return False
    return True


@njit(cache=True, inline="always")
def _xprev_ok(e, last, v, vals, kinds, ex):
    """The program prev relationships of ``v`` for event e after ``last``."""
    for r in range(ex[13][v], ex[13][v + 1]):
        p = ex[14][r]
        if not run_program(ex[4], ex[5][p], ex[5][p + 1], ex[6], ex[7], vals, kinds, e, last,
                           ex[8], ex[9]):
            return False
    return True


# ------------------------------------------------------------------------------------
# Match windows and summary statistics (match-window paper, Def. 5, Theorems 2-3)
# ------------------------------------------------------------------------------------
@njit(cache=True)
def scan_windows(ts, masks, seg_start, seg_end, tau, m, first_set, prev_mask, later_mask,
                 use_conditions, diagnose, need, min_events):
    """Every window [i, end) of every segment (partition) and the necessary conditions.

    ``need[v]``: the fewest events v binds (its Kleene minimum): a window is a candidate
    only with cnt_v >= need[v] for every v (cnt_v > 0 when need is 1, the paper's test)
    and at least ``min_events`` events.
    Returns (first, end) of the candidate windows, the largest window, and, when
    ``diagnose``, per event: the window end, the counters at test time, conditions 4-5,
    and the counters' test (Theorem 3). Counting follows ``windows.SummaryStatistics``:
    a counter is decremented only for an event counted for it, in the same epoch.
    """
    n = ts.shape[0]
    cand_first = np.empty(n, np.int64)
    cand_end = np.empty(n, np.int64)
    nc = 0
    max_window = 0
    dn = n if diagnose else 0
    d_end = np.zeros(dn, np.int64)
    d_cnt = np.zeros((dn, m), np.int64)
    d_c45 = np.zeros(dn, np.bool_)
    d_pos = np.zeros(dn, np.bool_)
    all_bits = (np.int64(1) << m) - 1
    cbits = np.zeros(n if use_conditions else 0, np.int64)
    cepoch = np.zeros((n if use_conditions else 0, m), np.int64)
    cnt = np.zeros(m, np.int64)
    epoch = np.zeros(m, np.int64)
    for s in range(seg_start.shape[0]):
        a = seg_start[s]
        b = seg_end[s]
        cnt[:] = 0
        epoch[:] = 0
        zero = all_bits
        j = a
        for i in range(a, b):
            while j < b and ts[j] - ts[i] <= tau:
                if use_conditions:
                    bits = np.int64(0)
                    mj = masks[j]
                    for v in range(m):
                        if (mj >> v) & 1 and (zero & prev_mask[v]) == 0:
                            bits |= np.int64(1) << v
                            cepoch[j, v] = epoch[v]
                    for v in range(m):
                        if (bits >> v) & 1:
                            cnt[v] += 1
                            zero &= ~(np.int64(1) << v)
                    cbits[j] = bits
                j += 1
            wlen = j - i
            if wlen > max_window:
                max_window = wlen
            c45 = wlen >= min_events and (masks[i] & first_set) != 0
            pos = zero == 0
            if pos and use_conditions:
                for v in range(m):
                    if cnt[v] < need[v]:
                        pos = False
                        break
            if diagnose:
                d_end[i] = j
                d_c45[i] = c45
                d_pos[i] = pos
                for v in range(m):
                    d_cnt[i, v] = cnt[v]
            if (not use_conditions) or (c45 and pos):
                cand_first[nc] = i
                cand_end[nc] = j
                nc += 1
            if use_conditions:
                bits = cbits[i]
                for v in range(m):
                    if (bits >> v) & 1 and cepoch[i, v] == epoch[v]:
                        cnt[v] -= 1
                        if cnt[v] == 0:
                            zero |= np.int64(1) << v
                            later = later_mask[v]
                            for w in range(m):
                                if (later >> w) & 1 and cnt[w] != 0:
                                    cnt[w] = 0
                                    epoch[w] += 1
                                    zero |= np.int64(1) << w
    return cand_first[:nc], cand_end[:nc], max_window, d_end, d_cnt, d_c45, d_pos


# ------------------------------------------------------------------------------------
# ZStream, seeded: all matches (Def. 2) whose first event is the window's first event
# ------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _rels_ok(e, v, vals, kinds, rel_ptr, rel_attr, rel_op, rel_other, rel_oattr,
             bst_ev, bst_var, nb):
    for r in range(rel_ptr[v], rel_ptr[v + 1]):
        a = rel_attr[r]
        op = rel_op[r]
        w = rel_other[r]
        b = rel_oattr[r]
        lv = vals[a, e]
        lk = kinds[a, e]
        for k in range(nb):
            if bst_var[k] == w:
                x = bst_ev[k]
                if not cmp(op, lv, lk, vals[b, x], kinds[b, x]):
                    return False
    return True


@njit(cache=True)
def zstream_windows(ts, vals, kinds, masks, cand_ptr, cand_idx, cand_ts,
                    rel_ptr, rel_attr, rel_op, rel_other, rel_oattr,
                    prev_ptr, prev_attr, prev_op, prev_oattr,
                    set_of, group, orders, win_first, win_end, w0, cap,
                    out_win, out_off, out_ev, out_var, stats, ex):
    """All matches of the windows w0, w0+1, ...: the window's first event is bound to
    each first-set variable it fits, the other variables are bound depth-first in the
    plan's order (``orders[s]`` starts with the seed variable s) from the events that fit
    them inside the window, under set order, relationships, prev and distinct events.
    A group variable binds every valid sequence (each extension is a partial match)
    whose length is within its bounds (``ex``: vmin, vmax); with contiguity (``ex``: pos,
    contig) a match is kept only when its events' positions form one run.

    ``stats`` (int64[4]) accumulates: partial matches, peak per window, matches, windows.
    Returns (status, window to resume at, matches written, events written).
    """
    m = set_of.shape[0]
    n_out = 0
    n_ev = 0
    max_out = out_win.shape[0]
    max_ev = out_ev.shape[0]
    depth_cap = 2 * (ts.shape[0] + m) + 4
    fr_kind = np.empty(depth_cap, np.int64)
    fr_d = np.empty(depth_cap, np.int64)
    fr_v = np.empty(depth_cap, np.int64)
    fr_pos = np.empty(depth_cap, np.int64)
    fr_hi = np.empty(depth_cap, np.int64)
    fr_bound = np.empty(depth_cap, np.int64)
    fr_init = np.empty(depth_cap, np.int64)
    bst_ev = np.empty(ts.shape[0] + m + 1, np.int64)
    bst_var = np.empty(ts.shape[0] + m + 1, np.int64)
    used = np.zeros(ts.shape[0], np.bool_)
    vmin = ex[0]
    vmax = ex[1]
    pos = ex[2]
    contig = ex[3]
    cntb = np.zeros(m, np.int64)
    for w in range(w0, win_first.shape[0]):
        i = win_first[w]
        end = win_end[w]
        start_out = n_out
        start_ev = n_ev
        partial = 0
        status = DONE
        for s in range(m):
            if set_of[s] != 0 or not (masks[i] >> s) & 1:
                continue
            a = cand_ptr[s]
            b = cand_ptr[s + 1]
            p_seed = _lower(cand_idx, a, b, i)
            hi_s = _lower(cand_idx, a, b, end)
            bst_ev[0] = i
            bst_var[0] = s
            nb = 1
            used[i] = True
            cntb[s] = 1
            partial += 1
            if partial > cap:
                status = CAP
            sp = 0
            if status == DONE and group[s] and vmax[s] > 1:
                fr_kind[sp] = _EXT
                fr_d[sp] = 0
                fr_v[sp] = s
                fr_pos[sp] = p_seed + 1
                fr_hi[sp] = hi_s
                fr_bound[sp] = -1
                fr_init[sp] = 1
                sp += 1
            if status == DONE and vmin[s] <= 1:
                if m == 1:
                    if n_out >= max_out or n_ev + 1 > max_ev:
                        status = FULL
                    else:
                        out_win[n_out] = w
                        out_ev[n_ev] = i
                        out_var[n_ev] = s
                        n_ev += 1
                        n_out += 1
                        out_off[n_out] = n_ev
                else:
                    fr_kind[sp] = _LEVEL
                    fr_d[sp] = 1
                    fr_v[sp] = orders[s, 1]
                    fr_bound[sp] = -1
                    fr_init[sp] = 0
                    sp += 1
            while sp > 0 and status == DONE:
                t = sp - 1
                v = fr_v[t]
                if fr_bound[t] >= 0:
                    used[fr_bound[t]] = False
                    nb -= 1
                    cntb[v] -= 1
                    fr_bound[t] = -1
                if fr_init[t] == 0:
                    fr_init[t] = 1
                    lo_ts = _I64_MIN
                    hi_ts = _I64_MAX
                    sv = set_of[v]
                    for k in range(nb):
                        te = ts[bst_ev[k]]
                        sw = set_of[bst_var[k]]
                        if sw < sv and te > lo_ts:
                            lo_ts = te
                        elif sw > sv and te < hi_ts:
                            hi_ts = te
                    a = cand_ptr[v]
                    b = cand_ptr[v + 1]
                    lo = _upper(cand_idx, a, b, i)
                    hi = _lower(cand_idx, lo, b, end)
                    if lo_ts != _I64_MIN:
                        lo = _upper(cand_ts, lo, hi, lo_ts)
                    if hi_ts != _I64_MAX:
                        hi = _lower(cand_ts, lo, hi, hi_ts)
                    fr_pos[t] = lo
                    fr_hi[t] = hi
                found = -1
                ext = fr_kind[t] == _EXT
                while fr_pos[t] < fr_hi[t]:
                    p = fr_pos[t]
                    fr_pos[t] = p + 1
                    e = cand_idx[p]
                    if used[e]:
                        continue
                    ok = True
                    if ext:
                        last = bst_ev[nb - 1]
                        for c in range(prev_ptr[v], prev_ptr[v + 1]):
                            if not cmp(prev_op[c], vals[prev_attr[c], e], kinds[prev_attr[c], e],
                                       vals[prev_oattr[c], last], kinds[prev_oattr[c], last]):
                                ok = False
                                break
                        if ok:
                            ok = _xprev_ok(e, last, v, vals, kinds, ex)
                    if ok and _rels_ok(e, v, vals, kinds, rel_ptr, rel_attr, rel_op, rel_other,
                                       rel_oattr, bst_ev, bst_var, nb) \
                            and _xrels_ok(e, v, vals, kinds, ex, bst_ev, bst_var, nb):
                        found = p
                        break
                if found < 0:
                    sp -= 1
                    continue
                e = cand_idx[found]
                bst_ev[nb] = e
                bst_var[nb] = v
                nb += 1
                used[e] = True
                cntb[v] += 1
                fr_bound[t] = e
                partial += 1
                if partial > cap:
                    status = CAP
                    break
                d = fr_d[t]
                if group[v] and cntb[v] < vmax[v]:
                    fr_kind[sp] = _EXT
                    fr_d[sp] = d
                    fr_v[sp] = v
                    fr_pos[sp] = found + 1
                    fr_hi[sp] = fr_hi[t]
                    fr_bound[sp] = -1
                    fr_init[sp] = 1
                    sp += 1
                if cntb[v] < vmin[v]:
                    continue  # fewer events than v's minimum: only extensions go on
                if d + 1 == m:
                    if contig:
                        lo_p = pos[bst_ev[0]]
                        hi_p = lo_p
                        for k in range(1, nb):
                            q = pos[bst_ev[k]]
                            lo_p = min(lo_p, q)
                            hi_p = max(hi_p, q)
                        if hi_p - lo_p + 1 != nb:
                            continue
                    if n_out >= max_out or n_ev + nb > max_ev:
                        status = FULL
                        break
                    out_win[n_out] = w
                    for vv in range(m):
                        for k in range(nb):
                            if bst_var[k] == vv:
                                out_ev[n_ev] = bst_ev[k]
                                out_var[n_ev] = vv
                                n_ev += 1
                    n_out += 1
                    out_off[n_out] = n_ev
                else:
                    fr_kind[sp] = _LEVEL
                    fr_d[sp] = d + 1
                    fr_v[sp] = orders[s, d + 1]
                    fr_bound[sp] = -1
                    fr_init[sp] = 0
                    sp += 1
            for k in range(nb):
                used[bst_ev[k]] = False
            cntb[:] = 0
            if status != DONE:
                break
        if status != DONE:
            if status == FULL:
                n_out = start_out
                n_ev = start_ev
            return status, w, n_out, n_ev
        stats[0] += partial
        if partial > stats[1]:
            stats[1] = partial
        stats[2] += n_out - start_out
        stats[3] += 1
    return DONE, win_first.shape[0], n_out, n_ev


# ------------------------------------------------------------------------------------
# The SES automaton (SES paper, Algorithms 1-2): instances with persistent bindings
# ------------------------------------------------------------------------------------
@njit(cache=True)
def _grow(a, size):
    b = np.empty(size, a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True, inline="always")
def _fires(k, j, t, ts, vals, kinds, masks, tr_var, tr_new, trc_ptr, trc_attr, trc_op,
           trc_other, trc_oattr, prev_ptr, prev_attr, prev_op, prev_oattr,
           ilast, ihead, node_ev, node_prev, ex):
    v = tr_var[t]
    if not (masks[j] >> v) & 1:
        return False
    if tr_new[t] and not ts[j] > ilast[k]:
        return False
    if tr_new[t] == 2 and not _contiguous(k, j, ihead, node_ev, ihead.shape[1], ex[2]):
        return False  # a [next b] step: the very next event after the set before
    for c in range(trc_ptr[t], trc_ptr[t + 1]):
        a = trc_attr[c]
        op = trc_op[c]
        b = trc_oattr[c]
        lv = vals[a, j]
        lk = kinds[a, j]
        node = ihead[k, trc_other[c]]
        while node >= 0:
            x = node_ev[node]
            if not cmp(op, lv, lk, vals[b, x], kinds[b, x]):
                return False
            node = node_prev[node]
    xptr = ex[10]
    for r in range(xptr[t], xptr[t + 1]):  # program relationships of the transition
        p = ex[12][r]
        node = ihead[k, ex[11][r]]
        while node >= 0:
            if not run_program(ex[4], ex[5][p], ex[5][p + 1], ex[6], ex[7], vals, kinds, j,
                               node_ev[node], ex[8], ex[9]):
                return False
            node = node_prev[node]
    h = ihead[k, v]
    if h >= 0:
        x = node_ev[h]
        for c in range(prev_ptr[v], prev_ptr[v + 1]):
            if not cmp(prev_op[c], vals[prev_attr[c], j], kinds[prev_attr[c], j],
                       vals[prev_oattr[c], x], kinds[prev_oattr[c], x]):
                return False
        if not _xprev_ok(j, x, v, vals, kinds, ex):
            return False
        f = ex[15]
        ci = f[f[F_RANK_OF] + v]  # a consecutive group: no event that fits it between
        if ci >= 0 and f[f[F_RANKS] + ci * f[F_N] + j] != f[f[F_RANKS] + ci * f[F_N] + x] + 1:
            return False
        if f[f[F_RPTR] + v + 1] > f[f[F_RPTR] + v] and not _running_ok(
                j, v, h, node_ev, node_prev, vals, kinds, ex):
            return False
        vmax = ex[1][v]
        if vmax < _I64_MAX:  # Kleene bound: the loop stops at the maximum
            count = 0
            node = h
            while node >= 0 and count < vmax:
                count += 1
                node = node_prev[node]
            if count >= vmax:
                return False
    return True


@njit(cache=True)
def _aggregate(func, b, seq, n, vals, kinds):
    """(value, kind) of an aggregate over the events ``seq[:n]`` (processing order), as
    ``conditions.aggregate``: 0 count, 1 sum, 2 avg, 3 min, 4 max, 5 first, 6 last;
    ``b`` the attribute row, -1 for count(v)."""
    if b < 0:
        return float(n), 1
    if func == 5 or func == 6:
        if n == 0:
            return np.nan, 0
        x = seq[0] if func == 5 else seq[n - 1]
        return vals[b, x], kinds[b, x]
    present = 0
    numbers = 0
    total = 0.0
    lo = np.inf
    hi = -np.inf
    texts = 0
    tlo = np.inf
    thi = -np.inf
    for q in range(n):
        x = seq[q]
        k = kinds[b, x]
        if k == 0:
            continue
        present += 1
        v = vals[b, x]
        if k == 1:
            numbers += 1
            total += v
            lo = min(lo, v)
            hi = max(hi, v)
        elif k == 2:
            texts += 1
            tlo = min(tlo, v)
            thi = max(thi, v)
    if func == 0:
        return float(present), 1
    if func == 1 or func == 2:
        if numbers == 0:
            return np.nan, 0
        return (total if func == 1 else total / numbers), 1
    if numbers > 0:
        return (lo if func == 3 else hi), 1
    if texts > 0:
        return (tlo if func == 3 else thi), 2
    return np.nan, 0


@njit(cache=True)
def _running_holds(r, j, seq, n, vals, kinds, ex):
    """Running condition r for event j against the events ``seq[:n]`` bound before it:
    its aggregates into their constant slots, then its program with j in slot 0."""
    f = ex[15]
    for a in range(f[f[F_APTR] + r], f[f[F_APTR] + r + 1]):
        q = f[F_AGGS] + 3 * a
        value, kind = _aggregate(f[q + 1], f[q + 2], seq, n, vals, kinds)
        ex[6][f[q]] = value
        ex[7][f[q]] = kind
    p = f[f[F_RPROG] + r]
    return run_program(ex[4], ex[5][p], ex[5][p + 1], ex[6], ex[7], vals, kinds, j, j, ex[8],
                       ex[9])


@njit(cache=True)
def _running_ok(j, v, h, node_ev, node_prev, vals, kinds, ex):
    """Every running condition of variable v for event j against the events of v's chain
    (newest node ``h``), oldest first."""
    n = 0
    node = h
    while node >= 0:
        n += 1
        node = node_prev[node]
    seq = np.empty(n, np.int64)
    node = h
    q = n - 1
    while node >= 0:
        seq[q] = node_ev[node]
        q -= 1
        node = node_prev[node]
    f = ex[15]
    for r in range(f[f[F_RPTR] + v], f[f[F_RPTR] + v + 1]):
        if not _running_holds(r, j, seq, n, vals, kinds, ex):
            return False
    return True


@njit(cache=True)
def running_keep(offsets, rows, variables, vals, kinds, ex):
    """Per match (rows ``rows[offsets[k]:offsets[k+1]]``, variable by variable in
    processing order), whether every running condition holds for each event of its group
    against the events before it (ZStream's matches; the automaton checks them itself)."""
    n_match = offsets.shape[0] - 1
    keep = np.ones(n_match, np.bool_)
    f = ex[15]
    m = f[F_RPROG] - f[F_RPTR] - 1
    for k in range(n_match):
        a = offsets[k]
        b = offsets[k + 1]
        for v in range(m):
            lo = f[f[F_RPTR] + v]
            hi = f[f[F_RPTR] + v + 1]
            if hi == lo:
                continue
            seq = rows[a:b][variables[a:b] == v]
            for i in range(1, seq.shape[0]):
                for r in range(lo, hi):
                    if not _running_holds(r, seq[i], seq, i, vals, kinds, ex):
                        keep[k] = False
                        break
                if not keep[k]:
                    break
            if not keep[k]:
                break
    return keep


@njit(cache=True, inline="always")
def _contiguous(k, j, ihead, node_ev, m, pos):
    """Whether event j comes right after instance k's last bound event (the newest node
    of its chains) in the contiguity positions."""
    newest = -1
    for vv in range(m):
        if ihead[k, vv] > newest:
            newest = ihead[k, vv]
    return newest < 0 or pos[j] == pos[node_ev[newest]] + 1


@njit(cache=True)
def _reaches_min(k, head, node_prev, vmin, m):
    """Whether every variable of instance k has at least its minimum of events."""
    for vv in range(m):
        if vmin[vv] > 1:
            count = 0
            node = head[k, vv]
            while node >= 0 and count < vmin[vv]:
                count += 1
                node = node_prev[node]
            if count < vmin[vv]:
                return False
    return True


@njit(cache=True)
def _instances(size, m):
    """Instance rows: state, first ts, last ts, and the head node of each variable."""
    return (np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64),
            np.empty((size, m), np.int64))


@njit(cache=True, inline="always")
def _instance_bytes(rows, m, nodes):
    """Memory of ``rows`` instance rows (state, first, last, m heads) and the node pool."""
    return rows * (3 + m) * 8 + nodes * 16


@njit(cache=True, inline="always")
def _room_fits(nx, cur_rows, nxt_rows, m, nodes, budget):
    """Whether the next generation may take one more instance: no growth is needed, or
    the doubled arrays (old and new alive together while copying) stay in ``budget``."""
    return nx < nxt_rows or _instance_bytes(cur_rows + 3 * nxt_rows, m, nodes) <= budget


@njit(cache=True)
def _room(nx, st, first, last, head, m):
    """The next-generation arrays with room for one more instance."""
    if nx < st.shape[0]:
        return st, first, last, head
    size = 2 * st.shape[0]
    h2 = np.empty((size, m), np.int64)
    h2[:nx] = head[:nx]
    return _grow(st, size), _grow(first, size), _grow(last, size), h2


@njit(cache=True)
def _step(j, nc, cur_st, cur_first, cur_last, cur_head, nxt_st, nxt_first, nxt_last, nxt_head,
          node_ev, node_prev, nn, ts, vals, kinds, masks, st_ptr, tr_var, tr_target, tr_new,
          trc_ptr, trc_attr, trc_op, trc_other, trc_oattr, prev_ptr, prev_attr, prev_op,
          prev_oattr, start, m, budget, ex):
    """ConsumeEvent (SES paper, Algorithm 2) of event j for the nc current instances: one
    new instance per firing transition, the instance itself when none fires (unless it is
    the start instance). Returns the next generation and the grown node pool; the count
    is -1 when growing an array would take the instances and nodes over ``budget`` bytes
    (checked before each growth, counting the old and the new array together)."""
    nx = 0
    created = 0
    mj = masks[j]
    for k in range(nc):
        state = cur_st[k]
        fired = False
        if mj != 0 and (ex[3] == 0 or state == start
                        or _contiguous(k, j, cur_head, node_ev, m, ex[2])):
            for t in range(st_ptr[state], st_ptr[state + 1]):
                if not _fires(k, j, t, ts, vals, kinds, masks, tr_var, tr_new, trc_ptr,
                              trc_attr, trc_op, trc_other, trc_oattr, prev_ptr, prev_attr,
                              prev_op, prev_oattr, cur_last, cur_head, node_ev, node_prev, ex):
                    continue
                fired = True
                v = tr_var[t]
                if nn >= node_ev.shape[0]:
                    if _instance_bytes(cur_st.shape[0] + nxt_st.shape[0], m, 3 * nn) > budget:
                        return (-1, created, nxt_st, nxt_first, nxt_last, nxt_head, node_ev,
                                node_prev, nn)
                    node_ev = _grow(node_ev, 2 * nn)
                    node_prev = _grow(node_prev, 2 * nn)
                node_ev[nn] = j
                node_prev[nn] = cur_head[k, v]
                if not _room_fits(nx, cur_st.shape[0], nxt_st.shape[0], m, node_ev.shape[0],
                                  budget):
                    return (-1, created, nxt_st, nxt_first, nxt_last, nxt_head, node_ev,
                            node_prev, nn)
                nxt_st, nxt_first, nxt_last, nxt_head = _room(nx, nxt_st, nxt_first, nxt_last,
                                                              nxt_head, m)
                nxt_st[nx] = tr_target[t]
                nxt_first[nx] = ts[j] if state == start else cur_first[k]
                nxt_last[nx] = ts[j]
                for vv in range(m):
                    nxt_head[nx, vv] = cur_head[k, vv]
                nxt_head[nx, v] = nn
                nn += 1
                nx += 1
                created += 1
        if not fired and state != start:
            if not _room_fits(nx, cur_st.shape[0], nxt_st.shape[0], m, node_ev.shape[0],
                              budget):
                return (-1, created, nxt_st, nxt_first, nxt_last, nxt_head, node_ev,
                        node_prev, nn)
            nxt_st, nxt_first, nxt_last, nxt_head = _room(nx, nxt_st, nxt_first, nxt_last,
                                                          nxt_head, m)
            nxt_st[nx] = state
            nxt_first[nx] = cur_first[k]
            nxt_last[nx] = cur_last[k]
            for vv in range(m):
                nxt_head[nx, vv] = cur_head[k, vv]
            nx += 1
    return nx, created, nxt_st, nxt_first, nxt_last, nxt_head, node_ev, node_prev, nn


@njit(cache=True)
def ses_windows(ts, vals, kinds, masks, st_ptr, tr_var, tr_target, tr_new,
                trc_ptr, trc_attr, trc_op, trc_other, trc_oattr,
                prev_ptr, prev_attr, prev_op, prev_oattr, start, final, m,
                win_first, win_end, w0, cap, budget, out_win, out_off, out_ev, out_var,
                stats, ex):
    """A(P, W) for the windows w0, w0+1, ...: the instance started at the window's first
    event, run over the window (ConsumeEvent: a transition fires when the event fits its
    variable, follows the bound set in time, and satisfies its relationships against every
    bound event and ``prev`` against the variable's last event; several firing transitions
    branch; an instance where none fires stays). Bindings are persistent lists (one chain
    of nodes per variable), so branching copies m integers, not the bindings.

    ``stats`` (int64[4]) accumulates: instances created, peak live instances, matches,
    windows. Returns (status, window to resume at, matches written, events written);
    CAP: more than ``cap`` live instances, BUDGET: instances and binding nodes need more
    than ``budget`` bytes.
    """
    n_out = 0
    n_ev = 0
    max_out = out_win.shape[0]
    max_ev = out_ev.shape[0]
    cur_st, cur_first, cur_last, cur_head = _instances(64, m)
    nxt_st, nxt_first, nxt_last, nxt_head = _instances(64, m)
    node_ev = np.empty(1024, np.int64)
    node_prev = np.empty(1024, np.int64)
    seq = np.empty(64, np.int64)
    for w in range(w0, win_first.shape[0]):
        i = win_first[w]
        end = win_end[w]
        nn = 0
        nc = 1
        cur_st[0] = start
        cur_first[0] = 0
        cur_last[0] = 0
        cur_head[0, :] = -1
        peak = 0
        created = 0
        for j in range(i, end):
            nx, made, nxt_st, nxt_first, nxt_last, nxt_head, node_ev, node_prev, nn = _step(
                j, nc, cur_st, cur_first, cur_last, cur_head, nxt_st, nxt_first, nxt_last,
                nxt_head, node_ev, node_prev, nn, ts, vals, kinds, masks, st_ptr, tr_var,
                tr_target, tr_new, trc_ptr, trc_attr, trc_op, trc_other, trc_oattr, prev_ptr,
                prev_attr, prev_op, prev_oattr, start, m, budget, ex)
            created += made
            if nx < 0:
                return BUDGET, w, n_out, n_ev
            if nx > peak:
                peak = nx
            if nx > cap:
                return CAP, w, n_out, n_ev
            cur_st, nxt_st = nxt_st, cur_st
            cur_first, nxt_first = nxt_first, cur_first
            cur_last, nxt_last = nxt_last, cur_last
            cur_head, nxt_head = nxt_head, cur_head
            nc = nx
            if nc == 0:
                break
        start_out = n_out
        start_ev = n_ev
        for k in range(nc):
            if cur_st[k] != final or not _reaches_min(k, cur_head, node_prev, ex[0], m):
                continue
            if n_out >= max_out:
                return FULL, w, start_out, start_ev
            out_win[n_out] = w
            for vv in range(m):
                cnt = 0
                node = cur_head[k, vv]
                while node >= 0:
                    if cnt >= seq.shape[0]:
                        seq = _grow(seq, 2 * cnt)
                    seq[cnt] = node_ev[node]
                    cnt += 1
                    node = node_prev[node]
                if n_ev + cnt > max_ev:
                    return FULL, w, start_out, start_ev
                for q in range(cnt):
                    out_ev[n_ev] = seq[cnt - 1 - q]
                    out_var[n_ev] = vv
                    n_ev += 1
            n_out += 1
            out_off[n_out] = n_ev
        stats[0] += created
        if peak > stats[1]:
            stats[1] = peak
        stats[2] += n_out - start_out
        stats[3] += 1
    return DONE, win_first.shape[0], n_out, n_ev


@njit(cache=True)
def ses_eager(ts, vals, kinds, masks, st_ptr, tr_var, tr_target, tr_new,
              trc_ptr, trc_attr, trc_op, trc_other, trc_oattr,
              prev_ptr, prev_attr, prev_op, prev_oattr, start, final, m, tau, budget, stats,
              ex):
    """SESExec (SES paper, Algorithm 1): an instance started at every event, all advanced
    together; an instance expires τ after its first event (emitted if accepting). Nodes of
    dead instances are compacted away when the pool fills. Returns (status, first,
    offsets, events, variables) of every match; status BUDGET (and the matches so far)
    when instances, nodes and matches need more than ``budget`` bytes."""
    n = ts.shape[0]
    status = DONE
    cur_st, cur_first, cur_last, cur_head = _instances(64, m)
    nxt_st, nxt_first, nxt_last, nxt_head = _instances(64, m)
    node_ev = np.empty(1024, np.int64)
    node_prev = np.empty(1024, np.int64)
    out_first = np.empty(16, np.int64)
    out_off = np.zeros(17, np.int64)
    out_ev = np.empty(64, np.int64)
    out_var = np.empty(64, np.int64)
    n_out = 0
    n_ev = 0
    nn = 0
    nc = 0
    peak = 0
    created = 0
    seq = np.empty(64, np.int64)
    for j in range(n + 1):
        # expire (and, after the last event, flush) instances
        for k in range(nc):
            if j < n and not (cur_st[k] != start and ts[j] - cur_first[k] > tau):
                continue
            if cur_st[k] == final and _reaches_min(k, cur_head, node_prev, ex[0], m):
                if n_out + 1 >= out_first.shape[0]:
                    out_first = _grow(out_first, 2 * out_first.shape[0])
                    out_off = _grow(out_off, 2 * out_off.shape[0])
                first = -1
                for vv in range(m):
                    cnt = 0
                    node = cur_head[k, vv]
                    while node >= 0:
                        if cnt >= seq.shape[0]:
                            seq = _grow(seq, 2 * cnt)
                        seq[cnt] = node_ev[node]
                        cnt += 1
                        node = node_prev[node]
                    while n_ev + cnt >= out_ev.shape[0]:
                        out_ev = _grow(out_ev, 2 * out_ev.shape[0])
                        out_var = _grow(out_var, 2 * out_var.shape[0])
                    for q in range(cnt):
                        x = seq[cnt - 1 - q]
                        if first < 0 or x < first:
                            first = x
                        out_ev[n_ev] = x
                        out_var[n_ev] = vv
                        n_ev += 1
                out_first[n_out] = first
                n_out += 1
                out_off[n_out] = n_ev
            cur_st[k] = -1  # expired
        if j == n:
            break
        # compact the live instances, then add the new one started at event j
        live = 0
        for k in range(nc):
            if cur_st[k] >= 0:
                cur_st[live] = cur_st[k]
                cur_first[live] = cur_first[k]
                cur_last[live] = cur_last[k]
                for vv in range(m):
                    cur_head[live, vv] = cur_head[k, vv]
                live += 1
        nc = live
        cur_st, cur_first, cur_last, cur_head = _room(nc, cur_st, cur_first, cur_last,
                                                      cur_head, m)
        cur_st[nc] = start
        cur_first[nc] = 0
        cur_last[nc] = 0
        cur_head[nc, :] = -1
        nc += 1
        # garbage-collect nodes no live instance reaches
        if nn + 2 * nc * m + 64 >= node_ev.shape[0]:
            mark = np.zeros(nn, np.bool_)
            for k in range(nc):
                for vv in range(m):
                    node = cur_head[k, vv]
                    while node >= 0 and not mark[node]:
                        mark[node] = True
                        node = node_prev[node]
            remap = np.full(nn, -1, np.int64)
            kept = 0
            for q in range(nn):
                if mark[q]:
                    remap[q] = kept
                    node_ev[kept] = node_ev[q]
                    node_prev[kept] = remap[node_prev[q]] if node_prev[q] >= 0 else -1
                    kept += 1
            for k in range(nc):
                for vv in range(m):
                    if cur_head[k, vv] >= 0:
                        cur_head[k, vv] = remap[cur_head[k, vv]]
            nn = kept
            want = max(2 * (nn + 2 * nc * m + 64), 1024)
            if want > node_ev.shape[0] and _instance_bytes(
                    cur_st.shape[0] + nxt_st.shape[0], m, node_ev.shape[0] + want) > budget:
                status = BUDGET
                break
            if want > node_ev.shape[0]:
                node_ev = _grow(node_ev, want)
                node_prev = _grow(node_prev, want)
        nx, made, nxt_st, nxt_first, nxt_last, nxt_head, node_ev, node_prev, nn = _step(
            j, nc, cur_st, cur_first, cur_last, cur_head, nxt_st, nxt_first, nxt_last,
            nxt_head, node_ev, node_prev, nn, ts, vals, kinds, masks, st_ptr, tr_var,
            tr_target, tr_new, trc_ptr, trc_attr, trc_op, trc_other, trc_oattr, prev_ptr,
            prev_attr, prev_op, prev_oattr, start, m, budget, ex)
        created += made
        if nx < 0:
            status = BUDGET
            break
        if nx > peak:
            peak = nx
        cur_st, nxt_st = nxt_st, cur_st
        cur_first, nxt_first = nxt_first, cur_first
        cur_last, nxt_last = nxt_last, cur_last
        cur_head, nxt_head = nxt_head, cur_head
        nc = nx
        if _instance_bytes(cur_st.shape[0] + nxt_st.shape[0], m, node_ev.shape[0]) \
                + out_ev.shape[0] * 16 + out_first.shape[0] * 16 > budget:
            status = BUDGET
            break
    stats[0] += created
    if peak > stats[1]:
        stats[1] = peak
    stats[2] += n_out
    stats[3] += n
    return status, out_first[:n_out], out_off[:n_out + 1], out_ev[:n_ev], out_var[:n_ev]


# ------------------------------------------------------------------------------------
# Negation: P's matches are the matches of P⁺ without a witness (docs/language.md)
# ------------------------------------------------------------------------------------
@njit(cache=True)
def negation_keep(ts, vals, kinds, offsets, ev, var, start_ts, end_ts, match_code, set_of,
                  n_sets, tau, neg_var, neg_min, neg_linked, neg_before, neg_after, cand_ptr,
                  cand_idx, cand_code, rel_ptr, rel_attr, rel_op, rel_other, rel_oattr, ex):
    """Per match (events ``ev[offsets[k]:offsets[k+1]]`` bound to ``var``), whether every
    negated variable has fewer than ``neg_min`` witnesses (1 for ``not n``: none): an event
    of its candidates (sorted by partition code,
    then processing order) inside its interval that satisfies its relationships with
    every event bound to a related variable. A linked variable (``neg_linked``) searches
    the candidates with the match's partition code, the others those with code 0 (all
    of them). Intervals: between sets (last of the set
    before, first of the set after), leading [end_ts - τ, first), trailing
    (last, start_ts + τ]."""
    n_match = offsets.shape[0] - 1
    keep = np.ones(n_match, np.bool_)
    lo_set = np.empty(n_sets, np.int64)
    hi_set = np.empty(n_sets, np.int64)
    for k in range(n_match):
        a = offsets[k]
        b = offsets[k + 1]
        lo_set[:] = _I64_MAX
        hi_set[:] = _I64_MIN
        for q in range(a, b):
            s = set_of[var[q]]
            t = ts[ev[q]]
            if t < lo_set[s]:
                lo_set[s] = t
            if t > hi_set[s]:
                hi_set[s] = t
        for j in range(neg_var.shape[0]):
            n = neg_var[j]
            if neg_before[j] < 0:
                lo = end_ts[k] - tau  # inclusive
                hi = lo_set[0] - 1  # strictly before the first event
            elif neg_after[j] < 0:
                lo = hi_set[neg_before[j]] + 1
                hi = start_ts[k] + tau
            else:
                lo = hi_set[neg_before[j]] + 1
                hi = lo_set[neg_after[j]] - 1
            if lo > hi:
                continue
            c0 = cand_ptr[j]
            c1 = cand_ptr[j + 1]
            code = match_code[k] if neg_linked[j] else 0
            p0 = _lower(cand_code, c0, c1, code)
            p1 = _upper(cand_code, p0, c1, code)
            p = p0
            while p < p1:  # first candidate with ts >= lo
                mid = (p + p1) >> 1
                if ts[cand_idx[mid]] < lo:
                    p = mid + 1
                else:
                    p1 = mid
            p1 = _upper(cand_code, p0, c1, code)
            found = 0
            while p < p1 and ts[cand_idx[p]] <= hi:
                e = cand_idx[p]
                if _rels_ok(e, n, vals, kinds, rel_ptr, rel_attr, rel_op, rel_other, rel_oattr,
                            ev[a:b], var[a:b], b - a) \
                        and _xrels_ok(e, n, vals, kinds, ex, ev[a:b], var[a:b], b - a):
                    found += 1
                    if found >= neg_min[j]:
                        keep[k] = False
                        break
                p += 1
            if not keep[k]:
                break
    return keep
