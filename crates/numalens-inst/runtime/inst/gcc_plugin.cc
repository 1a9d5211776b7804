// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The hooks' fast path, written into gcc's instrumented code.
 *
 * gcc's ThreadSanitizer pass turns every load and store into a call to __tsan_readN or
 * __tsan_writeN after inlining is over, so no link-time optimisation can inline the hooks. This
 * plugin runs right after that pass and replaces each such call with the fast path of
 * nl_access() (inst.h) itself, written in GIMPLE:
 *
 *   fast = nl_fast;
 *   if (fast & NL_FAST_SAMPLE) {
 *       nl_countdown_{read,write} -= words;
 *       if (nl_countdown_{read,write} <= 0) { nl_inst_sample(nl_ith, addr, is_write, size, 0); goto done; }
 *   }
 *   if (fast & NL_FAST_EXACT) {
 *       t = nl_ith; page = addr >> 12; slot = &t->tlb[hash(page)];
 *       entry = slot->entry;  then, volatile so in this order, the page number:
 *       if (slot->page == page) entry->counts[is_write] += words;
 *       else nl_inst_miss(t, addr, is_write, words);
 *   }
 *   done:
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

#include "fast_path.h"
#include "numalens_inst.h"

int plugin_is_GPL_compatible;

namespace {

/** The runtime's symbols the fast path uses; a garbage-collection root (see plugin_init). */
enum { FAST, COUNTDOWN_READ, COUNTDOWN_WRITE, ITH, SAMPLE, MISS, N_DECLS };
tree runtime_decls[N_DECLS];

const struct ggc_root_tab decl_roots[] = {
    {&runtime_decls[0], N_DECLS, sizeof(tree), &gt_ggc_mx_tree_node, &gt_pch_nx_tree_node},
    LAST_GGC_ROOT_TAB,
};

/** A hidden external symbol of the runtime (libnumalens_inst.a is linked into the program). */
tree hidden_external(tree decl)
{
    TREE_PUBLIC(decl) = 1;
    DECL_EXTERNAL(decl) = 1;
    DECL_VISIBILITY(decl) = VISIBILITY_HIDDEN;
    DECL_VISIBILITY_SPECIFIED(decl) = 1;
    return decl;
}

tree thread_local_var(const char *name, tree type)
{
    tree decl = build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier(name), type);
    hidden_external(decl);
    // As declared in inst.h; in an executable the linker makes it local-exec.
    set_decl_tls_model(decl, TLS_MODEL_INITIAL_EXEC);
    return decl;
}

tree runtime_function(const char *name, tree type)
{
    tree decl = hidden_external(build_fn_decl(name, type));
    // No exception passes through the runtime: the calls need no exception edges.
    TREE_NOTHROW(decl) = 1;
    return decl;
}

void declare_runtime()
{
    if (runtime_decls[FAST])
        return;
    runtime_decls[FAST] = thread_local_var("nl_fast", unsigned_type_node);
    runtime_decls[COUNTDOWN_READ] =
        thread_local_var("nl_countdown_read", long_long_integer_type_node);
    runtime_decls[COUNTDOWN_WRITE] =
        thread_local_var("nl_countdown_write", long_long_integer_type_node);
    runtime_decls[ITH] = thread_local_var("nl_ith", ptr_type_node);
    // void nl_inst_sample(struct nl_ithread *, uintptr_t, unsigned, unsigned, void *)
    runtime_decls[SAMPLE] = runtime_function(
        "nl_inst_sample",
        build_function_type_list(void_type_node, ptr_type_node, pointer_sized_int_node,
                                 unsigned_type_node, unsigned_type_node, ptr_type_node,
                                 NULL_TREE));
    // void nl_inst_miss(struct nl_ithread *, uintptr_t, unsigned, uint64_t)
    runtime_decls[MISS] = runtime_function(
        "nl_inst_miss",
        build_function_type_list(void_type_node, ptr_type_node, pointer_sized_int_node,
                                 unsigned_type_node, long_long_unsigned_type_node, NULL_TREE));
}

struct access {
    bool is_write;
    unsigned size;
};

/** Whether @p stmt is a plain access call of gcc's instrumentation, and which. */
bool plain_access(gimple *stmt, access *out)
{
    if (!is_gimple_call(stmt) || !gimple_call_builtin_p(stmt, BUILT_IN_NORMAL))
        return false;
    switch (DECL_FUNCTION_CODE(gimple_call_fndecl(stmt))) {
#define NL_CASE(code, write, bytes)                                                            \
    case code:                                                                                 \
        *out = {write, bytes};                                                                 \
        return true;
        NL_CASE(BUILT_IN_TSAN_READ1, false, 1)
        NL_CASE(BUILT_IN_TSAN_READ2, false, 2)
        NL_CASE(BUILT_IN_TSAN_READ4, false, 4)
        NL_CASE(BUILT_IN_TSAN_READ8, false, 8)
        NL_CASE(BUILT_IN_TSAN_READ16, false, 16)
        NL_CASE(BUILT_IN_TSAN_WRITE1, true, 1)
        NL_CASE(BUILT_IN_TSAN_WRITE2, true, 2)
        NL_CASE(BUILT_IN_TSAN_WRITE4, true, 4)
        NL_CASE(BUILT_IN_TSAN_WRITE8, true, 8)
        NL_CASE(BUILT_IN_TSAN_WRITE16, true, 16)
#undef NL_CASE
    default:
        return false;
    }
}

/** Appends statements to a block, each at the access's source location. */
struct block_writer {
    basic_block bb;
    location_t loc;

    gimple *add(gimple *stmt)
    {
        gimple_set_location(stmt, loc);
        gimple_stmt_iterator gsi = gsi_last_bb(bb);
        gsi_insert_after(&gsi, stmt, GSI_NEW_STMT);
        return stmt;
    }
    /** lhs = a CODE b, in a new SSA name of @p type. */
    tree op(tree type, tree_code code, tree a, tree b = NULL_TREE)
    {
        tree lhs = make_ssa_name(type);
        add(b ? gimple_build_assign(lhs, code, a, b) : gimple_build_assign(lhs, code, a));
        return lhs;
    }
    tree load(tree type, tree ref)
    {
        tree lhs = make_ssa_name(type);
        add(gimple_build_assign(lhs, ref));
        return lhs;
    }
    void branch(tree_code code, tree a, tree b) { add(gimple_build_cond(code, a, b, NULL_TREE, NULL_TREE)); }
};

/** *(TYPE *)((char *)base + offset); volatile when asked. Alias set 0: it may alias anything. */
tree memory_at(tree type, tree base, unsigned offset, bool is_volatile = false)
{
    tree ref = build2(MEM_REF, type, base, build_int_cst(ptr_type_node, offset));
    TREE_THIS_VOLATILE(ref) = is_volatile;
    TREE_SIDE_EFFECTS(ref) = is_volatile;
    return ref;
}

basic_block new_block_after(basic_block after)
{
    basic_block bb = create_empty_bb(after);
    if (current_loops)
        add_bb_to_loop(bb, after->loop_father);
    return bb;
}

void link(basic_block from, basic_block to, int flags, profile_probability p)
{
    edge e = make_edge(from, to, flags);
    e->probability = p;
}

/** Replaces the access call @p call with the fast path. */
void inline_access(gimple *call, access a)
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
    unsigned long long words = a.size > 8 ? a.size / 8 : 1;
    tree is_write = build_int_cst(uint, a.is_write);

    block_writer w{head, loc};
    tree addr = w.op(pointer_sized_int_node, NOP_EXPR, pointer);
    tree fast = w.load(uint, runtime_decls[FAST]);
    w.branch(NE_EXPR, w.op(uint, BIT_AND_EXPR, fast, build_int_cst(uint, NL_FAST_SAMPLE)),
             build_zero_cst(uint));

    basic_block countdown = new_block_after(head);
    basic_block sample = new_block_after(countdown);
    basic_block exact_check = new_block_after(sample);
    basic_block exact = new_block_after(exact_check);
    basic_block hit = new_block_after(exact);
    basic_block miss = new_block_after(hit);
    link(head, countdown, EDGE_TRUE_VALUE, profile_probability::even());
    link(head, exact_check, EDGE_FALSE_VALUE, profile_probability::even());

    w.bb = countdown;
    tree countdown_var = runtime_decls[a.is_write ? COUNTDOWN_WRITE : COUNTDOWN_READ];
    tree left = w.op(s64, MINUS_EXPR, w.load(s64, countdown_var), build_int_cst(s64, words));
    w.add(gimple_build_assign(countdown_var, left));
    w.branch(LE_EXPR, left, build_zero_cst(s64));
    link(countdown, sample, EDGE_TRUE_VALUE, profile_probability::very_unlikely());
    link(countdown, exact_check, EDGE_FALSE_VALUE, profile_probability::very_likely());

    // The sample's instruction address is the call's return address (a null ip says so).
    w.bb = sample;
    w.add(gimple_build_call(runtime_decls[SAMPLE], 5, w.load(ptr_type_node, runtime_decls[ITH]),
                            addr, is_write, build_int_cst(uint, a.size), null_pointer_node));
    link(sample, done, EDGE_FALLTHRU, profile_probability::always());

    w.bb = exact_check;
    w.branch(NE_EXPR, w.op(uint, BIT_AND_EXPR, fast, build_int_cst(uint, NL_FAST_EXACT)),
             build_zero_cst(uint));
    link(exact_check, exact, EDGE_TRUE_VALUE, profile_probability::likely());
    link(exact_check, done, EDGE_FALSE_VALUE, profile_probability::unlikely());

    w.bb = exact;
    tree thread = w.load(ptr_type_node, runtime_decls[ITH]);
    tree page = w.op(u64, RSHIFT_EXPR, addr, build_int_cst(uint, NL_INST_PAGE_SHIFT));
    tree hashed = w.op(u64, MULT_EXPR, page, build_int_cstu(u64, NL_TLB_HASH));
    tree index = w.op(u64, BIT_AND_EXPR,
                      w.op(u64, RSHIFT_EXPR, hashed, build_int_cst(uint, NL_TLB_HASH_SHIFT)),
                      build_int_cst(u64, NL_TLB_SLOTS - 1));
    tree offset = w.op(sizetype, MULT_EXPR, w.op(sizetype, NOP_EXPR, index),
                       build_int_cst(sizetype, NL_TLB_SLOT_BYTES));
    tree slot = w.op(ptr_type_node, POINTER_PLUS_EXPR, thread, offset);
    // The entry before the page number, volatile so they stay in that order: see nl_tlb_lookup.
    tree entry = w.load(ptr_type_node, memory_at(ptr_type_node, slot,
                                                 NL_ITHREAD_TLB_OFFSET + NL_TLB_SLOT_ENTRY_OFFSET,
                                                 true));
    tree cached = w.load(u64, memory_at(u64, slot, NL_ITHREAD_TLB_OFFSET + NL_TLB_SLOT_PAGE_OFFSET,
                                        true));
    w.branch(EQ_EXPR, cached, page);
    link(exact, hit, EDGE_TRUE_VALUE, profile_probability::very_likely());
    link(exact, miss, EDGE_FALSE_VALUE, profile_probability::very_unlikely());

    w.bb = hit;
    unsigned counter = NL_PAGE_COUNTS_OFFSET + 8 * a.is_write;
    tree count = w.op(u64, PLUS_EXPR, w.load(u64, memory_at(u64, entry, counter)),
                      build_int_cst(u64, words));
    w.add(gimple_build_assign(memory_at(u64, entry, counter), count));
    link(hit, done, EDGE_FALLTHRU, profile_probability::always());

    w.bb = miss;
    w.add(gimple_build_call(runtime_decls[MISS], 4, thread, addr, is_write,
                            build_int_cst(u64, words)));
    link(miss, done, EDGE_FALLTHRU, profile_probability::always());

    // Block frequencies, for gcc's layout: the slow paths go out of line.
    countdown->count = head->count.apply_probability(profile_probability::even());
    sample->count = countdown->count.apply_probability(profile_probability::very_unlikely());
    exact_check->count = head->count;
    exact->count = head->count.apply_probability(profile_probability::likely());
    hit->count = exact->count.apply_probability(profile_probability::very_likely());
    miss->count = exact->count.apply_probability(profile_probability::very_unlikely());
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
        auto_vec<std::pair<gimple *, access>> calls;
        basic_block bb;
        FOR_EACH_BB_FN (bb, fn) {
            for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
                access a;
                if (plain_access(gsi_stmt(gsi), &a))
                    calls.safe_push({gsi_stmt(gsi), a});
            }
        }
        if (calls.is_empty())
            return 0;
        declare_runtime();
        for (auto &c : calls)
            inline_access(c.first, c.second);
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
