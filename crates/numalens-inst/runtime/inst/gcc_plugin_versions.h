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
 * the exact copy keeps the exact path in line, the other has it out of line. Both copies test
 * the mode at every access as before, so a thread whose mode changes inside a loop (its first
 * access sets up its state) counts right in either; only the layout differs.
 */
#ifndef NL_GCC_PLUGIN_VERSIONS_H
#define NL_GCC_PLUGIN_VERSIONS_H

namespace {

/** The loops of @p fn entered only by threads that do not count exactly. */
class mode_versions {
  public:
    /** Versions the outermost loops holding accesses of @p calls on @p fast (the function's
     * copy of the mode word): when its NL_FAST_EXACT bit is clear, the new copy runs. A loop
     * gcc cannot copy (abnormal edges, blocks that must stay unique) keeps one copy. */
    void make(function *fn, const access_calls &calls, tree fast)
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
        auto_vec<class loop *> order;
        for (class loop *l : outermost)
            order.safe_push(l);
        // Preheaders and single latches, which copying needs; the loop passes after this one
        // set up their own.
        loop_optimizer_init(LOOPS_NORMAL);
        initialize_original_copy_tables();
        tree uint = unsigned_type_node;
        for (class loop *l : order) {
            tree exact = build2(BIT_AND_EXPR, uint, fast, build_int_cst(uint, NL_FAST_EXACT));
            tree cond = build2(NE_EXPR, boolean_type_node, exact, build_zero_cst(uint));
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
};

} // namespace

#endif
