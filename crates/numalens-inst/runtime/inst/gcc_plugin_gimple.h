// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The gcc plugin's building blocks (gcc_plugin.cc says what the plugin does): the runtime's
 * symbols as gcc declarations, which calls are plain accesses, writing GIMPLE block by block,
 * and the count of accesses in a page through the thread's page cache. Included once, by
 * gcc_plugin.cc, after gcc's headers.
 */
#ifndef NL_GCC_PLUGIN_GIMPLE_H
#define NL_GCC_PLUGIN_GIMPLE_H

namespace {

/** The runtime's symbols the fast path uses; a garbage-collection root (see plugin_init). */
enum { FAST, COUNTDOWN_READ, COUNTDOWN_WRITE, ITH, SAMPLE, MISS, INACTIVE, PREPARE, N_DECLS };
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
    // Volatile: calls to functions gcc takes for pure still step the countdowns through their
    // own instrumented accesses, so no value may be carried across them.
    TREE_THIS_VOLATILE(decl) = 1;
    TREE_SIDE_EFFECTS(decl) = 1;
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
    // struct nl_ithread nl_inactive: only its address is used, the state of threads not set up.
    tree inactive = build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier("nl_inactive"),
                               char_type_node);
    TREE_ADDRESSABLE(inactive) = 1;
    runtime_decls[INACTIVE] = hidden_external(inactive);
    // void nl_inst_prepare(void)
    runtime_decls[PREPARE] =
        runtime_function("nl_inst_prepare", build_function_type_list(void_type_node, NULL_TREE));
}

struct access {
    bool is_write;
    unsigned size;
};

/** What an access counts as: a 16-byte access is the two 8-byte words it moves (nl_words). */
unsigned long long access_words(const access &a) { return a.size > 8 ? a.size / 8 : 1; }

/** Whether @p stmt calls a function (an internal function is no call at run time). */
bool is_real_call(const gimple *stmt)
{
    return stmt && is_gimple_call(stmt) && !gimple_call_internal_p(stmt);
}

/** The plain access calls of a function, in the order they were found. */
typedef auto_vec<std::pair<gimple *, access>> access_calls;

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

/** Where the fast path finds the thread's mode word, countdowns and state: the runtime's
 * thread-local variables themselves, or a function's own copies of them (see keep_in_registers). */
struct fast_state {
    tree fast;
    tree countdown[2]; // reads, writes
    tree ith;
};

fast_state runtime_state()
{
    return {runtime_decls[FAST],
            {runtime_decls[COUNTDOWN_READ], runtime_decls[COUNTDOWN_WRITE]},
            runtime_decls[ITH]};
}

/** Counts @p count accesses (of type u64) of page number @p page through the page cache of
 * @p thread (struct nl_ithread *), appending to @p w's block and ending at @p done:
 *
 *   slot = &thread->tlb[hash(page)];
 *   entry = slot->entry;  then, volatile so in this order, the page number:
 *   if (slot->page == page) entry->counts[is_write] += count;
 *   else nl_inst_miss(thread, page << 12, is_write, count);
 */
void emit_page_count(block_writer &w, tree thread, tree page, bool is_write, tree count,
                     basic_block done)
{
    tree u64 = long_long_unsigned_type_node;
    tree uint = unsigned_type_node;
    basic_block lookup = w.bb;
    basic_block hit = new_block_after(lookup);
    basic_block miss = new_block_after(hit);

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
    link(lookup, hit, EDGE_TRUE_VALUE, profile_probability::very_likely());
    link(lookup, miss, EDGE_FALSE_VALUE, profile_probability::very_unlikely());

    w.bb = hit;
    unsigned counter = NL_PAGE_COUNTS_OFFSET + 8 * is_write;
    tree sum = w.op(u64, PLUS_EXPR, w.load(u64, memory_at(u64, entry, counter)), count);
    w.add(gimple_build_assign(memory_at(u64, entry, counter), sum));
    link(hit, done, EDGE_FALLTHRU, profile_probability::always());

    w.bb = miss;
    tree addr = w.op(pointer_sized_int_node, LSHIFT_EXPR,
                     w.op(pointer_sized_int_node, NOP_EXPR, page),
                     build_int_cst(uint, NL_INST_PAGE_SHIFT));
    w.add(gimple_build_call(runtime_decls[MISS], 4, thread, addr, build_int_cst(uint, is_write),
                            count));
    link(miss, done, EDGE_FALLTHRU, profile_probability::always());

    // Block frequencies, for gcc's layout: the miss goes out of line.
    hit->count = lookup->count.apply_probability(profile_probability::very_likely());
    miss->count = lookup->count.apply_probability(profile_probability::very_unlikely());
}

} // namespace

#endif
