// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Two copies of each loop nest with accesses, one laid out for each way a thread counts
 * (gcc_plugin.cc says what the plugin does). Included once, by gcc_plugin.cc, after
 * gcc_plugin_gimple.h.
 *
 * Every access tests whether the thread counts exactly, and the test goes the same way for a
 * whole run. Laid out for exact counting, a thread that only samples (or records nothing)
 * jumps over the exact path at every access; laid out the other way, exact counting jumps out
 * and back. Taken jumps are what the loop then waits on: a stencil with a dozen accesses per
 * iteration ran 1.3 times as long as with none, and a sampled thread, whose rare jumps to the
 * sampling path make every countdown test a branch the predictor tracks as well, 1.6 times.
 * So each outermost loop with accesses is versioned on the thread's mode when it is entered:
 * the exact copy keeps the exact path, the other has none, and its accesses only step the
 * countdown. A thread's mode word changes when its state is set up (at its first access, or
 * in a fork child) and when it ends; so that it cannot change inside a loop that chose the copy
 * without exact counting, a thread not set up yet is set up on the loop's entry edge
 * (nl_inst_prepare). A fork child keeps its parent's mode. Only a thread whose state could not
 * be made before the loop (no memory) and is made inside it, by a signal handler's access,
 * counts nothing exactly until the loop ends.
 */
#ifndef NL_GCC_PLUGIN_VERSIONS_H
#define NL_GCC_PLUGIN_VERSIONS_H

namespace {

/** The loops of @p fn entered only by threads that do not count exactly. */
class mode_versions {
  public:
    /** Versions the outermost loops holding accesses of @p calls on the mode word of @p st
     * (the function's copies): when its NL_FAST_EXACT bit is clear, the new copy runs. A loop
     * with more than one entry, or that gcc cannot copy (abnormal edges, blocks that must stay
     * unique), keeps one copy. */
    void make(function *fn, const access_calls &calls, const fast_state &st)
    {
        hash_set<class loop *> outermost;
        for (const auto &c : calls) {
            class loop *l = gimple_bb(c.first)->loop_father;
            if (loop_depth(l) == 0)
                continue;
            while (loop_depth(l) > 1)
                l = loop_outer(l);
            outermost.add(l);
        }
        if (outermost.is_empty())
            return;
        free_dominance_info(CDI_DOMINATORS);
        auto_vec<std::pair<class loop *, tree>> order;
        for (class loop *l : outermost)
            if (tree exact = prepare_on_entry(l, st))
                order.safe_push({l, exact});
        // Preheaders and single latches, which copying needs; the loop passes after this one
        // set up their own.
        loop_optimizer_init(LOOPS_NORMAL);
        initialize_original_copy_tables();
        for (const auto &entry : order) {
            class loop *l = entry.first;
            tree cond = build2(NE_EXPR, boolean_type_node, entry.second,
                               build_zero_cst(unsigned_type_node));
            class loop *copy = loop_version(l, cond, NULL, profile_probability::even(),
                                            profile_probability::even(),
                                            profile_probability::even(),
                                            profile_probability::even(), true);
            if (copy)
                not_exact.add(copy);
        }
        free_original_copy_tables();
        loop_optimizer_finalize(fn);
    }

    /** Whether @p bb lies in a copy for threads that do not count exactly. */
    bool without_exact(basic_block bb) const
    {
        for (class loop *l = bb->loop_father; l && loop_depth(l) > 0; l = loop_outer(l))
            if (not_exact.contains(l))
                return true;
        return false;
    }

  private:
    mutable hash_set<class loop *> not_exact; // contains() is not const

    /** On the one edge that enters @p l: a thread not set up yet is set up, so that its mode
     * word says before the loop how it counts; then its exact bit, in a variable the loop's
     * version test compares (NULL: @p l has more than one entry). */
    static tree prepare_on_entry(class loop *l, const fast_state &st)
    {
        edge entry = NULL;
        edge e;
        edge_iterator ei;
        FOR_EACH_EDGE (e, ei, l->header->preds) {
            if (flow_bb_inside_loop_p(l, e->src))
                continue;
            if (entry || (e->flags & (EDGE_EH | EDGE_ABNORMAL)))
                return NULL_TREE;
            entry = e;
        }
        if (!entry)
            return NULL_TREE;
        basic_block test = split_edge(entry);
        basic_block join = split_edge(single_succ_edge(test));
        remove_edge(single_succ_edge(test));
        basic_block set_up = new_block_after(test);
        set_up->count = test->count.apply_probability(profile_probability::very_unlikely());
        block_writer w{test, DECL_SOURCE_LOCATION(current_function_decl)};
        w.branch(EQ_EXPR, w.load(ptr_type_node, st.ith),
                 build_fold_addr_expr(runtime_decls[INACTIVE]));
        link(test, set_up, EDGE_TRUE_VALUE, profile_probability::very_unlikely());
        link(test, join, EDGE_FALSE_VALUE, profile_probability::very_likely());
        w.bb = set_up;
        w.add(gimple_build_call(runtime_decls[PREPARE], 0));
        link(set_up, join, EDGE_FALLTHRU, profile_probability::always());
        // Computed before the test: gcc's checker wants a comparison of plain operands there.
        tree uint = unsigned_type_node;
        tree exact = create_tmp_reg(uint, "nl_exact");
        gimple_stmt_iterator gsi = gsi_after_labels(join);
        gimple *mask = gimple_build_assign(exact, BIT_AND_EXPR, st.fast,
                                           build_int_cst(uint, NL_FAST_EXACT));
        gsi_insert_before(&gsi, mask, GSI_SAME_STMT);
        return exact;
    }
};

/* ---- One countdown step per block in the copy without exact counting ----
 * There an access only steps its countdown, so the accesses of a block (those not separated by
 * a call) step it once, by all their words, at the block's last access: one subtract and
 * branch instead of one per access, and their addresses are only needed when a sample is due.
 * Then, out of line, the countdown goes back to its value before the block and the accesses
 * step it one by one as they would have, each taking its sample where it runs out: the same
 * samples on the same accesses (at the block's end instead of each access's place, which no
 * other code sees), each with its own instruction address. */

/** The accesses of a block, in order, that step their countdowns together. */
typedef auto_vec<std::pair<gimple *, access>> access_group;

/** Groups of the accesses of @p calls that lie in copies without exact counting. */
void group_by_block(const access_calls &calls, const mode_versions &versions,
                    auto_vec<access_group *> *groups)
{
    hash_set<gimple *> wanted;
    for (const auto &c : calls)
        if (versions.without_exact(gimple_bb(c.first)))
            wanted.add(c.first);
    if (wanted.is_empty())
        return;
    basic_block bb;
    FOR_EACH_BB_FN (bb, cfun) {
        access_group *open = NULL;
        for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
            gimple *stmt = gsi_stmt(gsi);
            access a;
            if (wanted.contains(stmt) && plain_access(stmt, &a)) {
                if (!open) {
                    open = new access_group;
                    groups->safe_push(open);
                }
                open->safe_push({stmt, a});
            } else if (is_real_call(stmt)) {
                open = NULL; // a call sees the countdowns: the next accesses step them anew
            }
        }
    }
}

/** Writes the group's countdown steps after its last access and removes its calls. */
void inline_group(access_group &group, const fast_state &st)
{
    tree s64 = long_long_integer_type_node;
    tree uint = unsigned_type_node;
    gimple *last = group.last().first;
    basic_block head = gimple_bb(last);
    basic_block done = split_block(head, last)->dest;
    remove_edge(single_succ_edge(head));
    location_t loc = gimple_location(last);
    auto_vec<tree> pointers;
    for (const auto &c : group) {
        pointers.safe_push(gimple_call_arg(c.first, 0));
        gimple_stmt_iterator gsi = gsi_for_stmt(c.first);
        unlink_stmt_vdef(c.first);
        gsi_remove(&gsi, true);
        release_defs(c.first);
    }
    block_writer w{head, loc};
    for (bool is_write : {false, true}) {
        unsigned long long total = 0;
        for (const auto &c : group)
            if (c.second.is_write == is_write)
                total += access_words(c.second);
        if (!total)
            continue;
        tree countdown = st.countdown[is_write];
        basic_block replay = new_block_after(w.bb);
        basic_block next = new_block_after(replay);
        tree left = w.op(s64, MINUS_EXPR, w.load(s64, countdown), build_int_cst(s64, total));
        w.add(gimple_build_assign(countdown, left));
        w.branch(LE_EXPR, left, build_zero_cst(s64));
        link(w.bb, replay, EDGE_TRUE_VALUE, profile_probability::very_unlikely());
        link(w.bb, next, EDGE_FALSE_VALUE, profile_probability::very_likely());
        replay->count = w.bb->count.apply_probability(profile_probability::very_unlikely());
        next->count = w.bb->count;
        // Out of line: back to the value before the block, then access by access.
        w.bb = replay;
        w.add(gimple_build_assign(
            countdown, w.op(s64, PLUS_EXPR, w.load(s64, countdown), build_int_cst(s64, total))));
        for (unsigned i = 0; i < group.length(); i++) {
            const access &a = group[i].second;
            if (a.is_write != is_write)
                continue;
            w.loc = gimple_location(group[i].first);
            basic_block sample = new_block_after(w.bb);
            basic_block after = new_block_after(sample);
            sample->count = after->count = replay->count;
            tree step = w.op(s64, MINUS_EXPR, w.load(s64, countdown),
                             build_int_cst(s64, access_words(a)));
            w.add(gimple_build_assign(countdown, step));
            w.branch(LE_EXPR, step, build_zero_cst(s64));
            link(w.bb, sample, EDGE_TRUE_VALUE, profile_probability::unlikely());
            link(w.bb, after, EDGE_FALSE_VALUE, profile_probability::likely());
            w.bb = sample;
            tree addr = w.op(pointer_sized_int_node, NOP_EXPR, pointers[i]);
            // The sample's instruction address is this call's return address, at the access's
            // source location.
            w.add(gimple_build_call(runtime_decls[SAMPLE], 5, w.load(ptr_type_node, st.ith),
                                    addr, build_int_cst(uint, is_write),
                                    build_int_cst(uint, a.size), null_pointer_node));
            link(sample, after, EDGE_FALLTHRU, profile_probability::always());
            w.bb = after;
        }
        link(w.bb, next, EDGE_FALLTHRU, profile_probability::always());
        w.bb = next;
        w.loc = loc;
    }
    link(w.bb, done, EDGE_FALLTHRU, profile_probability::always());
}

} // namespace

#endif
