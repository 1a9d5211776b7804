// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The hooks' fast path, written into gcc's instrumented code.
 *
 * gcc's ThreadSanitizer pass turns every load and store into a call to __tsan_readN or
 * __tsan_writeN after inlining is over, so no link-time optimisation can inline the hooks. This
 * plugin runs right after that pass and replaces each such call with the fast path of
 * nl_access() (inst.h) itself, written in GIMPLE:
 *
 *   nl_countdown_{read,write} -= words;          (INT64_MAX in a thread that does not sample)
 *   if (nl_countdown_{read,write} <= 0) { nl_inst_sample(nl_ith, addr, is_write, size, 0); goto done; }
 *   if (nl_fast & NL_FAST_EXACT) {
 *       t = nl_ith; page = addr >> 12; slot = &t->tlb[hash(page)];
 *       entry = slot->entry;  then, volatile so in this order, the page number:
 *       if (slot->page == page) entry->counts[is_write] += words;
 *       else nl_inst_miss(t, addr, is_write, words);
 *   }
 *   done:
 *
 * In a function with accesses inside loops the thread's state lives in the function's own
 * variables, gcc's registers, and each loop nest comes in two copies, one per way a thread
 * counts, chosen when the nest is entered (gcc_plugin_versions.h): in the exact copy an access
 * site of a nest without calls counts its current page in registers (gcc_plugin_registers.h);
 * in the other, the accesses of a block step their countdown once.
 *
 * gcc then allocates registers and lays out the code around it as for the program's own code,
 * the slow paths out of line. The layout figures come from fast_path.h, which inst.h checks
 * against its structures. Calls to __tsan_func_entry/exit are not emitted at all (the wrapper
 * passes --param=tsan-instrument-func-entry-exit=0: their hooks do nothing); range accesses,
 * atomics, volatile accesses and accesses gcc cannot prove aligned (it checks those as ranges)
 * stay calls.
 *
 * The wrappers build this plugin with the user's own gcc, against that gcc's plugin headers
 * (`gcc -print-file-name=plugin`, Debian package gcc-N-plugin-dev), the first time they need it:
 * see src/inst/gcc_plugin.rs.
 */
// gcc's headers depend on each other's order.
#include "gcc-plugin.h"
#include "plugin-version.h"
#include "tree.h"
#include "tree-pass.h"
#include "context.h"
#include "basic-block.h"
#include "gimple.h"
#include "gimple-iterator.h"
#include "tree-cfg.h"
#include "cfgloop.h"
#include "ssa.h"
#include "cgraph.h"
#include "stringpool.h"
#include "varasm.h"
#include "tree-into-ssa.h"
#include "diagnostic-core.h"
#include "cfgloopmanip.h"

#include "fast_path.h"
#include "numalens_inst.h"
int plugin_is_GPL_compatible;

#include "gcc_plugin_gimple.h"
#include "gcc_plugin_versions.h"
#include "gcc_plugin_registers.h"

namespace {

/** Replaces the access call @p call with the fast path, reading the thread's state from @p st;
 * with @p site, the exact count goes to the site's accumulator while it stays on one page.
 * (In a loop copy for threads that do not count exactly, inline_group writes the accesses.) */
void inline_access(gimple *call, access a, const fast_state &st, const access_site *site)
{
    location_t loc = gimple_location(call);
    tree pointer = gimple_call_arg(call, 0);
    basic_block head = gimple_bb(call);
    basic_block done = split_block(head, call)->dest;
    remove_edge(single_succ_edge(head));
    gimple_stmt_iterator gsi = gsi_for_stmt(call);
    unlink_stmt_vdef(call);
    gsi_remove(&gsi, true);
    release_defs(call);

    tree u64 = long_long_unsigned_type_node;
    tree s64 = long_long_integer_type_node;
    tree uint = unsigned_type_node;
    unsigned long long words = access_words(a);

    block_writer w{head, loc};
    tree addr = w.op(pointer_sized_int_node, NOP_EXPR, pointer);
    // No test of NL_FAST_SAMPLE: a thread that does not sample has its countdowns at INT64_MAX
    // (fast_path.h), so the step below never runs them out.
    basic_block sample = new_block_after(head);
    basic_block exact_check = new_block_after(sample);

    tree countdown_var = st.countdown[a.is_write];
    tree left = w.op(s64, MINUS_EXPR, w.load(s64, countdown_var), build_int_cst(s64, words));
    w.add(gimple_build_assign(countdown_var, left));
    w.branch(LE_EXPR, left, build_zero_cst(s64));
    link(head, sample, EDGE_TRUE_VALUE, profile_probability::very_unlikely());
    link(head, exact_check, EDGE_FALSE_VALUE, profile_probability::very_likely());
    // Block frequencies, for gcc's layout: the slow paths go out of line.
    sample->count = head->count.apply_probability(profile_probability::very_unlikely());

    // The sample's instruction address is the call's return address (a null ip says so).
    w.bb = sample;
    w.add(gimple_build_call(runtime_decls[SAMPLE], 5, w.load(ptr_type_node, st.ith), addr,
                            build_int_cst(uint, a.is_write), build_int_cst(uint, a.size),
                            null_pointer_node));
    link(sample, done, EDGE_FALLTHRU, profile_probability::always());

    basic_block exact = new_block_after(exact_check);
    w.bb = exact_check;
    tree fast = w.load(uint, st.fast);
    w.branch(NE_EXPR, w.op(uint, BIT_AND_EXPR, fast, build_int_cst(uint, NL_FAST_EXACT)),
             build_zero_cst(uint));
    link(exact_check, exact, EDGE_TRUE_VALUE, profile_probability::likely());
    link(exact_check, done, EDGE_FALSE_VALUE, profile_probability::unlikely());
    exact_check->count = head->count;
    exact->count = head->count.apply_probability(profile_probability::likely());

    w.bb = exact;
    tree page = w.op(u64, RSHIFT_EXPR, addr, build_int_cst(uint, NL_INST_PAGE_SHIFT));
    if (site)
        emit_site_count(w, *site, st, page, words, done);
    else
        emit_page_count(w, w.load(ptr_type_node, st.ith), page, a.is_write,
                        build_int_cst(u64, words), done);
}

void find_access_calls(function *fn, access_calls *calls)
{
    basic_block bb;
    FOR_EACH_BB_FN (bb, fn) {
        for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
            access a;
            if (plain_access(gsi_stmt(gsi), &a))
                calls->safe_push({gsi_stmt(gsi), a});
        }
    }
}

const pass_data inline_pass_data = {
    GIMPLE_PASS,
    "numalens_inline",
    OPTGROUP_NONE,
    TV_NONE,
    PROP_ssa | PROP_cfg,
    0,
    0,
    0,
    TODO_update_ssa,
};

struct inline_pass : gimple_opt_pass {
    explicit inline_pass(gcc::context *ctxt) : gimple_opt_pass(inline_pass_data, ctxt) {}

    bool gate(function *) final override { return (flag_sanitize & SANITIZE_THREAD) != 0; }

    unsigned int execute(function *fn) final override
    {
        access_calls calls;
        find_access_calls(fn, &calls);
        if (calls.is_empty())
            return 0;
        declare_runtime();
        bool in_registers = keeps_state_in_registers(fn, calls);
        fast_state st = in_registers ? local_state() : runtime_state();
        mode_versions versions;
        if (in_registers) {
            versions.make(fn, calls, st);
            calls.truncate(0);
            find_access_calls(fn, &calls);
        }
        site_plan sites;
        if (in_registers)
            sites.choose(fn, calls, versions);
        auto_vec<bool> with_exact;
        for (const auto &c : calls)
            with_exact.safe_push(!versions.without_exact(gimple_bb(c.first)));
        // In the copies without exact counting, one countdown step per block.
        auto_vec<access_group *> groups;
        group_by_block(calls, versions, &groups);
        for (access_group *group : groups) {
            inline_group(*group, st);
            delete group;
        }
        for (unsigned i = 0; i < calls.length(); i++)
            if (with_exact[i])
                inline_access(calls[i].first, calls[i].second, st, sites.of(i));
        if (in_registers) {
            sites.flush_at_exits(st);
            sync_state_at_calls(fn, st, sites);
        }
        free_dominance_info(CDI_DOMINATORS);
        mark_virtual_operands_for_renaming(fn);
        cgraph_edge::rebuild_edges();
        return TODO_update_ssa;
    }

    opt_pass *clone() final override { return new inline_pass(m_ctxt); }
};

void register_after(const char *plugin, const char *pass_name)
{
    struct register_pass_info info;
    info.pass = new inline_pass(g);
    info.reference_pass_name = pass_name;
    info.ref_pass_instance_number = 1;
    info.pos_op = PASS_POS_INSERT_AFTER;
    register_callback(plugin, PLUGIN_PASS_MANAGER_SETUP, NULL, &info);
}

} // namespace

int plugin_init(struct plugin_name_args *info, struct plugin_gcc_version *version)
{
    if (!plugin_default_version_check(version, &gcc_version)) {
        error("the numalens plugin was built for gcc %s, not this one", gcc_version.basever);
        return 1;
    }
    register_callback(info->base_name, PLUGIN_REGISTER_GGC_ROOTS, NULL,
                      const_cast<ggc_root_tab *>(decl_roots));
    // The optimising pipeline's pass and the one of -O0.
    register_after(info->base_name, "tsan");
    register_after(info->base_name, "tsan0");
    return 0;
}

