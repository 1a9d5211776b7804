// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * What the gcc plugin keeps in registers for a whole function (gcc_plugin.cc says what the
 * plugin does): the thread's state, and each access site's exact counts of its current page.
 * Included once, by gcc_plugin.cc, after gcc_plugin_versions.h.
 */
#ifndef NL_GCC_PLUGIN_REGISTERS_H
#define NL_GCC_PLUGIN_REGISTERS_H

namespace {

/* ---- The thread's state in registers ----
 * Read from thread-local storage at every access, the fast path is a chain of loads and stores
 * through memory: the countdown's load, subtract and store make each access wait for the last.
 * In a function with instrumented accesses inside loops the state lives instead in the
 * function's own variables, which gcc keeps in registers: copied from the runtime's variables at
 * the function's entry, after every call and at the start of every exception handler, and the
 * countdowns written back before every call, return and rethrow (resx). The runtime's variables
 * are accessed as volatile: a callee declared pure (or found pure by gcc) still steps them
 * through its own instrumented accesses, so gcc must not carry a value across it. A call that
 * leads straight to a return (a tail call) gets no copy after it and the return no write-back,
 * so gcc can still make it a jump: a tail-recursive program keeps its stack depth. A signal
 * handler that samples between two write-backs has its countdown overwritten at the next one:
 * the handler's samples then fall more often than one per interval (a 10 kHz handler writing
 * 64 longs beside a reading loop got 2.3 times its share of store samples). */

/** Whether @p fn keeps the state in registers: it makes accesses in loops (elsewhere each
 * access runs once per call, and the copies would cost about what they save), it is optimised
 * (at -O0 every variable lives in memory anyway), and no control flow enters it abnormally
 * (setjmp, non-local gotos), where the copies could not follow. */
bool keeps_state_in_registers(function *fn, const access_calls &calls)
{
    if (!optimize || !current_loops || fn->calls_setjmp || fn->has_nonlocal_label)
        return false;
    for (const auto &c : calls)
        if (loop_depth(gimple_bb(c.first)->loop_father) > 0)
            return true;
    return false;
}

fast_state local_state()
{
    tree s64 = long_long_integer_type_node;
    return {create_tmp_reg(unsigned_type_node, "nl_fast"),
            {create_tmp_reg(s64, "nl_countdown_read"), create_tmp_reg(s64, "nl_countdown_write")},
            create_tmp_reg(ptr_type_node, "nl_ith")};
}

void add_copy(gimple_seq *seq, tree to, tree from, location_t loc)
{
    gimple *copy = gimple_build_assign(to, from);
    gimple_set_location(copy, loc);
    gimple_seq_add_stmt(seq, copy);
}

/** The function's copies from the runtime's variables. */
gimple_seq state_loads(const fast_state &local, location_t loc)
{
    fast_state runtime = runtime_state();
    gimple_seq seq = NULL;
    add_copy(&seq, local.fast, runtime.fast, loc);
    for (int k = 0; k < 2; k++)
        add_copy(&seq, local.countdown[k], runtime.countdown[k], loc);
    add_copy(&seq, local.ith, runtime.ith, loc);
    return seq;
}

/** The countdowns back into the runtime's variables (the mode word and the state pointer are
 * only ever changed by the runtime). */
gimple_seq countdown_stores(const fast_state &local, location_t loc)
{
    fast_state runtime = runtime_state();
    gimple_seq seq = NULL;
    add_copy(&seq, runtime.countdown[0], local.countdown[0], loc);
    add_copy(&seq, runtime.countdown[1], local.countdown[1], loc);
    return seq;
}

/** The first statement of @p bb that is not a label or debug statement. */
gimple *first_real_stmt(basic_block bb)
{
    gimple_stmt_iterator gsi = gsi_after_labels(bb);
    while (!gsi_end_p(gsi) && is_gimple_debug(gsi_stmt(gsi)))
        gsi_next(&gsi);
    return gsi_end_p(gsi) ? NULL : gsi_stmt(gsi);
}

/** The statement after @p stmt in its block, debug statements skipped. */
gimple *next_real_stmt(gimple *stmt)
{
    gimple_stmt_iterator gsi = gsi_for_stmt(stmt);
    for (gsi_next(&gsi); !gsi_end_p(gsi) && is_gimple_debug(gsi_stmt(gsi)); gsi_next(&gsi)) {
    }
    return gsi_end_p(gsi) ? NULL : gsi_stmt(gsi);
}

/** The statement before @p stmt in its block, debug statements skipped. */
gimple *prev_real_stmt(gimple *stmt)
{
    gimple_stmt_iterator gsi = gsi_for_stmt(stmt);
    for (gsi_prev(&gsi); !gsi_end_p(gsi) && is_gimple_debug(gsi_stmt(gsi)); gsi_prev(&gsi)) {
    }
    return gsi_end_p(gsi) ? NULL : gsi_stmt(gsi);
}

/** Whether an abnormal or exception edge enters @p bb: nothing can be put on those. */
bool entered_abnormally(basic_block bb)
{
    edge e;
    edge_iterator ei;
    FOR_EACH_EDGE (e, ei, bb->preds)
        if (e->flags & (EDGE_EH | EDGE_ABNORMAL))
            return true;
    return false;
}

/** Whether the call @p stmt leads straight to a return: the return follows it in its block, or
 * its block falls into a block holding only a return. */
bool leads_to_return(gimple *stmt)
{
    gimple *next = next_real_stmt(stmt);
    if (next)
        return gimple_code(next) == GIMPLE_RETURN;
    basic_block bb = gimple_bb(stmt);
    if (!single_succ_p(bb) || (single_succ_edge(bb)->flags & (EDGE_EH | EDGE_ABNORMAL)))
        return false;
    basic_block next_bb = single_succ(bb);
    gimple *first = first_real_stmt(next_bb);
    return first && gimple_code(first) == GIMPLE_RETURN && !entered_abnormally(next_bb);
}

/** Before a return: the write-back, except on the ways in from calls that lead straight to
 * it, which had theirs before the call. */
void write_back_before_return(gimple *ret, const fast_state &local)
{
    location_t loc = gimple_location(ret);
    basic_block bb = gimple_bb(ret);
    if (first_real_stmt(bb) != ret || entered_abnormally(bb)) {
        if (is_real_call(prev_real_stmt(ret)))
            return;
        gimple_stmt_iterator gsi = gsi_for_stmt(ret);
        gsi_insert_seq_before(&gsi, countdown_stores(local, loc), GSI_SAME_STMT);
        return;
    }
    edge e;
    edge_iterator ei;
    FOR_EACH_EDGE (e, ei, bb->preds) {
        gimple_stmt_iterator last_gsi = gsi_last_nondebug_bb(e->src);
        gimple *last = gsi_end_p(last_gsi) ? NULL : gsi_stmt(last_gsi);
        bool from_call = is_real_call(last) &&
                         single_succ_p(e->src) && !(e->flags & (EDGE_EH | EDGE_ABNORMAL));
        if (!from_call)
            gsi_insert_seq_on_edge(e, countdown_stores(local, loc));
    }
}

/** The edge a call returns by: not its exception edge, none for a call that does not return. */
edge return_edge(basic_block bb)
{
    edge e;
    edge_iterator ei;
    FOR_EACH_EDGE (e, ei, bb->succs)
        if (!(e->flags & (EDGE_EH | EDGE_ABNORMAL)))
            return e;
    return NULL;
}

/* ---- Each access site's exact counts in registers ----
 * Counted at every access, a page's counters are a chain of adds through memory: in a stencil
 * loop five reads of one array hit one page's read counter one after another, and each add waits
 * for the last. In a loop nest that makes no call, each access site (up to NL_SITES_PER_LOOP per
 * innermost loop, the innermost loops first) instead counts in its own variables while it stays
 * on one page: its page number and the accesses not yet added to the page's counters. When the
 * site moves to another page, those are added through the page cache and the access that moved is
 * counted there too, so the new page's entry, and the time of the thread's first access to it,
 * exist from its first access on; when the nest exits, every site's pending count is added, and
 * so is what the sites of an innermost loop hold every NL_SITE_LAPS of its iterations. Only what
 * a thread still running in a nest when its process ends had pending is lost, at most that many
 * iterations' accesses; nothing else looks at the counters while a nest runs, since it makes no
 * call (the runtime's slow paths do not read them). */

/** Sites per innermost loop whose counts stay in registers: stencils make 5 to 10 accesses per
 * iteration, and beyond the registers gcc has, a site's variables go to the stack. Counted per
 * innermost loop, not per nest: a nest whose edge cases come first in the code (Rodinia's
 * hotspot) would give them every register, and its hot interior loop none. */
#define NL_SITES_PER_LOOP 8

/** Iterations of an innermost loop after which its sites add what they hold: a limit on what
 * a thread still running in the loop when its process ends takes with it. A countdown per
 * iteration, not a test per access: a test of the pending count at every access cost heat-3d's
 * exact recording a quarter of its time. */
#define NL_SITE_LAPS 65536

struct access_site {
    tree page;    // page number of the pending accesses
    tree pending; // accesses of that page not yet added to its counters
    bool is_write;
};

/** Whether loop @p l and every loop inside it make no call but the accesses about to be
 * written inline, and leave only by plain edges. */
bool free_of_calls(class loop *l, hash_set<gimple *> &accesses)
{
    basic_block *body = get_loop_body(l);
    bool ok = true;
    for (unsigned i = 0; ok && i < l->num_nodes; i++) {
        for (gimple_stmt_iterator gsi = gsi_start_bb(body[i]); ok && !gsi_end_p(gsi);
             gsi_next(&gsi)) {
            gimple *stmt = gsi_stmt(gsi);
            if (is_real_call(stmt) &&
                !accesses.contains(stmt))
                ok = false;
        }
    }
    free(body);
    if (ok) {
        for (edge e : get_loop_exit_edges(l))
            if ((e->flags & (EDGE_EH | EDGE_ABNORMAL)) || e->dest == EXIT_BLOCK_PTR_FOR_FN(cfun))
                ok = false;
    }
    return ok;
}

/** Which access sites count in registers, and the code that adds their counts at the end. */
class site_plan {
  public:
    /** Gives sites to the accesses of @p calls in loop nests free of calls. Before any access is
     * written inline: the nests are told by the calls they make. */
    void choose(function *fn, const access_calls &calls, const mode_versions &versions)
    {
        calculate_dominance_info(CDI_DOMINATORS);
        hash_set<gimple *> accesses;
        for (const auto &c : calls)
            accesses.add(c.first);
        // Per loop number: 0 not looked at yet, 1 makes calls, 2 free of calls.
        auto_vec<char> looked;
        looked.safe_grow_cleared(number_of_loops(fn));
        auto_vec<unsigned> per_inner;
        per_inner.safe_grow_cleared(number_of_loops(fn));
        index.safe_grow(calls.length());
        int deepest = 0;
        for (unsigned i = 0; i < calls.length(); i++) {
            index[i] = -1;
            deepest = MAX(deepest, loop_depth(gimple_bb(calls[i].first)->loop_father));
        }
        for (int depth = deepest; depth > 0; depth--) {
            for (unsigned i = 0; i < calls.length(); i++) {
                basic_block bb = gimple_bb(calls[i].first);
                class loop *inner = bb->loop_father;
                // A copy for threads that do not count exactly keeps nothing in registers.
                if (loop_depth(inner) != (unsigned)depth || versions.without_exact(bb))
                    continue;
                class loop *home = home_of(inner, accesses, looked);
                if (!home || per_inner[inner->num] >= NL_SITES_PER_LOOP)
                    continue;
                per_inner[inner->num]++;
                index[i] = sites.length();
                tree u64 = long_long_unsigned_type_node;
                sites.safe_push({create_tmp_reg(u64, "nl_site_page"),
                                 create_tmp_reg(u64, "nl_site_pending"),
                                 calls[i].second.is_write});
                homes.safe_push(home);
                inners.safe_push(inner);
            }
        }
    }

    /** The site of access call @p i, or NULL. */
    const access_site *of(unsigned i) const
    {
        return i < index.length() && index[i] >= 0 ? &sites[index[i]] : NULL;
    }

    /** Their values at the function's entry: nothing pending, full lap counts. */
    void add_initial_values(gimple_seq *seq, location_t loc) const
    {
        for (const auto &l : laps)
            add_copy(seq, l.second, build_int_cst(long_long_unsigned_type_node, NL_SITE_LAPS),
                     loc);
        for (const access_site &s : sites) {
            add_copy(seq, s.page, build_all_ones_cst(long_long_unsigned_type_node), loc);
            add_copy(seq, s.pending, build_zero_cst(long_long_unsigned_type_node), loc);
        }
    }

    /** Adds each site's pending count on every exit of its nest. */
    void flush_at_exits(const fast_state &st)
    {
        // Loop bodies are told by dominance: the accesses written inline made new blocks.
        free_dominance_info(CDI_DOMINATORS);
        calculate_dominance_info(CDI_DOMINATORS);
        auto_vec<std::pair<edge, class loop *>> exits;
        hash_set<class loop *> seen;
        for (class loop *home : homes)
            if (!seen.add(home))
                for (edge e : get_loop_exit_edges(home))
                    exits.safe_push({e, home});
        free_dominance_info(CDI_DOMINATORS);
        for (const auto &exit : exits) {
            auto_vec<unsigned> mine;
            for (unsigned j = 0; j < sites.length(); j++)
                if (homes[j] == exit.second)
                    mine.safe_push(j);
            flush_on_edge(exit.first, mine, st);
        }
        hash_set<class loop *> lapped;
        for (class loop *inner : inners) {
            if (lapped.add(inner))
                continue;
            auto_vec<unsigned> mine;
            for (unsigned j = 0; j < sites.length(); j++)
                if (inners[j] == inner)
                    mine.safe_push(j);
            flush_every_laps(inner, mine, st);
        }
    }

  private:
    auto_vec<access_site> sites;
    auto_vec<class loop *> homes; // per site: the outermost loop free of calls around it
    auto_vec<class loop *> inners; // per site: its innermost loop
    auto_vec<std::pair<class loop *, tree>> laps; // per innermost loop with sites: its lap count
    auto_vec<int> index;    // per access call: its site, or -1

    static class loop *home_of(class loop *inner, hash_set<gimple *> &accesses,
                               auto_vec<char> &looked)
    {
        auto is_free = [&](class loop *l) {
            if (!looked[l->num])
                looked[l->num] = free_of_calls(l, accesses) ? 2 : 1;
            return looked[l->num] == 2;
        };
        if (loop_depth(inner) == 0 || !is_free(inner))
            return NULL;
        class loop *home = inner;
        while (loop_depth(loop_outer(home)) > 0 && is_free(loop_outer(home)))
            home = loop_outer(home);
        return home;
    }

    /** Appends to @p w: for each site of @p mine, if (pending) add it to its page; pending = 0. */
    void emit_site_flushes(block_writer &w, const auto_vec<unsigned> &mine, const fast_state &st)
    {
        tree u64 = long_long_unsigned_type_node;
        for (unsigned j : mine) {
            const access_site &s = sites[j];
            basic_block flush = new_block_after(w.bb);
            basic_block next = new_block_after(flush);
            flush->count = next->count = w.bb->count;
            tree pending = w.load(u64, s.pending);
            w.branch(NE_EXPR, pending, build_zero_cst(u64));
            link(w.bb, flush, EDGE_TRUE_VALUE, profile_probability::likely());
            link(w.bb, next, EDGE_FALSE_VALUE, profile_probability::unlikely());
            w.bb = flush;
            emit_page_count(w, w.load(ptr_type_node, st.ith), w.load(u64, s.page), s.is_write,
                            pending, next);
            w.bb = next;
            w.add(gimple_build_assign(s.pending, build_zero_cst(u64)));
        }
    }

    /** On exit edge @p e: the flushes of the sites of @p mine. */
    void flush_on_edge(edge e, const auto_vec<unsigned> &mine, const fast_state &st)
    {
        basic_block at = split_edge(e);
        basic_block end = split_edge(single_succ_edge(at));
        remove_edge(single_succ_edge(at));
        block_writer w{at, UNKNOWN_LOCATION};
        emit_site_flushes(w, mine, st);
        link(w.bb, end, EDGE_FALLTHRU, profile_probability::always());
    }

    /** On the back edge of innermost loop @p l: every NL_SITE_LAPS iterations, the flushes of
     * its sites, so that a loop that runs on and on (until its process ends) holds at most
     * that many iterations' counts. A loop with several latches keeps its counts to its exits. */
    void flush_every_laps(class loop *l, const auto_vec<unsigned> &mine, const fast_state &st)
    {
        if (!l->latch || EDGE_COUNT(l->latch->succs) != 1)
            return;
        tree u64 = long_long_unsigned_type_node;
        tree lap = create_tmp_reg(u64, "nl_site_laps");
        laps.safe_push({l, lap});
        basic_block count = split_edge(loop_latch_edge(l));
        basic_block latch = split_edge(single_succ_edge(count));
        remove_edge(single_succ_edge(count));
        basic_block flushes = new_block_after(count);
        flushes->count = count->count.apply_probability(profile_probability::very_unlikely());
        block_writer w{count, UNKNOWN_LOCATION};
        tree left = w.op(u64, MINUS_EXPR, w.load(u64, lap), build_int_cst(u64, 1));
        w.add(gimple_build_assign(lap, left));
        w.branch(EQ_EXPR, left, build_zero_cst(u64));
        link(count, flushes, EDGE_TRUE_VALUE, profile_probability::very_unlikely());
        link(count, latch, EDGE_FALSE_VALUE, profile_probability::very_likely());
        w.bb = flushes;
        emit_site_flushes(w, mine, st);
        w.add(gimple_build_assign(lap, build_int_cst(u64, NL_SITE_LAPS)));
        link(w.bb, latch, EDGE_FALLTHRU, profile_probability::always());
        l->latch = latch;
    }
};

/** The exact count of an access of @p page at @p site, appended to @p w's block, ending at
 * @p done:
 *
 *   if (page == site.page) site.pending += words;
 *   else {
 *       if (site.pending) add site.pending to site.page's counters (emit_page_count);
 *       site.page = page; site.pending = 0; add words to page's counters (emit_page_count);
 *   }
 */
void emit_site_count(block_writer &w, const access_site &site, const fast_state &st, tree page,
                     unsigned long long words, basic_block done)
{
    tree u64 = long_long_unsigned_type_node;
    basic_block compare = w.bb;
    basic_block same = new_block_after(compare);
    basic_block moved = new_block_after(same);
    basic_block flush = new_block_after(moved);
    basic_block fresh = new_block_after(flush);
    w.branch(EQ_EXPR, page, w.load(u64, site.page));
    link(compare, same, EDGE_TRUE_VALUE, profile_probability::very_likely());
    link(compare, moved, EDGE_FALSE_VALUE, profile_probability::very_unlikely());
    same->count = compare->count.apply_probability(profile_probability::very_likely());
    moved->count = flush->count = fresh->count =
        compare->count.apply_probability(profile_probability::very_unlikely());

    w.bb = same;
    tree sum = w.op(u64, PLUS_EXPR, w.load(u64, site.pending), build_int_cst(u64, words));
    w.add(gimple_build_assign(site.pending, sum));
    link(same, done, EDGE_FALLTHRU, profile_probability::always());

    w.bb = moved;
    tree old_page = w.load(u64, site.page);
    tree pending = w.load(u64, site.pending);
    w.branch(NE_EXPR, pending, build_zero_cst(u64));
    link(moved, flush, EDGE_TRUE_VALUE, profile_probability::likely());
    link(moved, fresh, EDGE_FALSE_VALUE, profile_probability::unlikely());

    w.bb = flush;
    emit_page_count(w, w.load(ptr_type_node, st.ith), old_page, site.is_write, pending, fresh);

    w.bb = fresh;
    w.add(gimple_build_assign(site.page, page));
    w.add(gimple_build_assign(site.pending, build_zero_cst(u64)));
    emit_page_count(w, w.load(ptr_type_node, st.ith), page, site.is_write,
                    build_int_cst(u64, words), done);
}

/** Surrounds every call and return of @p fn with the copies, and loads them (and the sites'
 * initial values) at its entry. */
/** Whether every edge into @p bb is an exception edge (a handler entered only by a throw). */
bool only_exception_edges_into(basic_block bb)
{
    if (EDGE_COUNT(bb->preds) == 0)
        return false;
    edge e;
    edge_iterator ei;
    FOR_EACH_EDGE (e, ei, bb->preds)
        if (!(e->flags & EDGE_EH))
            return false;
    return true;
}

void sync_state_at_calls(function *fn, const fast_state &local, const site_plan &sites)
{
    auto_vec<gimple *> call_sites;
    auto_vec<gimple *> returns;
    auto_vec<gimple *> rethrows;
    auto_vec<basic_block> handlers;
    basic_block bb;
    FOR_EACH_BB_FN (bb, fn) {
        if (only_exception_edges_into(bb))
            handlers.safe_push(bb);
        for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
            gimple *stmt = gsi_stmt(gsi);
            if (is_real_call(stmt))
                call_sites.safe_push(stmt);
            else if (gimple_code(stmt) == GIMPLE_RETURN)
                returns.safe_push(stmt);
            else if (gimple_code(stmt) == GIMPLE_RESX)
                rethrows.safe_push(stmt);
        }
    }
    for (gimple *stmt : call_sites) {
        location_t loc = gimple_location(stmt);
        gimple_stmt_iterator gsi = gsi_for_stmt(stmt);
        gsi_insert_seq_before(&gsi, countdown_stores(local, loc), GSI_SAME_STMT);
        if (leads_to_return(stmt))
            continue;
        if (!stmt_ends_bb_p(stmt))
            gsi_insert_seq_after(&gsi, state_loads(local, loc), GSI_SAME_STMT);
        else if (edge e = return_edge(gimple_bb(stmt)))
            gsi_insert_seq_on_edge(e, state_loads(local, loc));
    }
    for (gimple *ret : returns)
        write_back_before_return(ret, local);
    // A rethrow leaves for a handler (which copies again) or the caller.
    for (gimple *resx : rethrows) {
        gimple_stmt_iterator gsi = gsi_for_stmt(resx);
        gsi_insert_seq_before(&gsi, countdown_stores(local, gimple_location(resx)), GSI_SAME_STMT);
    }
    // An exception handler starts from the runtime's variables: the call that threw wrote its
    // steps back, and the function's copies are from before it.
    for (basic_block handler : handlers) {
        gimple_stmt_iterator gsi = gsi_after_labels(handler);
        gimple *first = first_real_stmt(handler);
        location_t loc = first ? gimple_location(first) : UNKNOWN_LOCATION;
        gsi_insert_seq_before(&gsi, state_loads(local, loc), GSI_SAME_STMT);
    }
    location_t entry = DECL_SOURCE_LOCATION(fn->decl);
    gimple_seq at_entry = state_loads(local, entry);
    sites.add_initial_values(&at_entry, entry);
    gsi_insert_seq_on_edge(single_succ_edge(ENTRY_BLOCK_PTR_FOR_FN(fn)), at_entry);
    gsi_commit_edge_inserts();
}

} // namespace

#endif
