/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file cfi_rules.c
 * @brief Works out, from one FDE of .eh_frame, how a frame at a given pc finds its caller.
 *
 * The subset of DWARF call-frame instructions that gcc and clang emit for ordinary x86-64 code:
 * the CFA defined as a register plus an offset, registers saved at offsets from the CFA,
 * advance/remember/restore; and the two expressions of a frame that realigned its stack. Only three columns matter for a walk: the CFA, rbp (the one register
 * a caller's CFA may be based on) and the return address. Anything outside the subset for those
 * columns makes the rule NL_RULE_UNKNOWN, and the walk falls back to libgcc; instructions about
 * other registers are read past. Pure: no globals, so it is tested on hand-made byte strings.
 */
#include <string.h>

#include "nl_internal.h"

enum { NL_REG_RBP = 6, NL_REG_RSP = 7, NL_REG_RA = 16 };
/* cfa_reg of a CFA loaded from rbp + cfa_off; the CFA of a frame that realigned its stack. */
enum { NL_CFA_DEREF_RBP = 1000 };
/* NL_SAVED_AT: at CFA + offset; NL_SAVED_AT_RBP: at rbp + offset (realigned frames). */
enum { NL_SAVED_SAME, NL_SAVED_AT, NL_SAVED_AT_RBP, NL_SAVED_UNDEFINED, NL_SAVED_OTHER };

enum { NL_OP_BREG_RBP = 0x76, NL_OP_DEREF = 0x06 };

struct nl_cfi_row {
    int cfa_reg;        /* DWARF register, NL_CFA_DEREF_RBP, or -1 for any other expression */
    int64_t cfa_off;
    int rbp_how, ra_how; /* NL_SAVED_* */
    int64_t rbp_off, ra_off;
};

struct nl_cfi_reader {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t nl_uleb(struct nl_cfi_reader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; r->p < r->end && shift < 64; shift += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t nl_sleb(struct nl_cfi_reader *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (r->p < r->end && shift < 64) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= ~0ull << shift;
            return (int64_t)v;
        }
    }
    r->bad = 1;
    return 0;
}

static uint64_t nl_fixed(struct nl_cfi_reader *r, unsigned size)
{
    uint64_t v = 0;
    if ((size_t)(r->end - r->p) < size) {
        r->bad = 1;
        return 0;
    }
    memcpy(&v, r->p, size); /* little-endian */
    r->p += size;
    return v;
}

/** Steps over one pointer of DW_EH_PE encoding @p enc (its value is not needed). */
static void nl_skip_encoded(struct nl_cfi_reader *r, uint8_t enc)
{
    if (enc == 0xff) /* omitted */
        return;
    if ((enc & 0x70) == 0x50) { /* aligned: never emitted for x86-64 */
        r->bad = 1;
        return;
    }
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: nl_fixed(r, 8); break;
    case 0x02: case 0x0a: nl_fixed(r, 2); break;
    case 0x03: case 0x0b: nl_fixed(r, 4); break;
    case 0x01: nl_uleb(r); break;
    case 0x09: nl_sleb(r); break;
    default: r->bad = 1;
    }
}

struct nl_cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    int has_z, signal;
    const uint8_t *insns, *end;
};

static int nl_parse_cie(const uint8_t *cie, struct nl_cie *c)
{
    uint32_t len;
    memcpy(&len, cie, 4);
    if (len == 0 || len == 0xffffffffu)
        return -1;
    struct nl_cfi_reader r = {cie + 4, cie + 4 + len, 0};
    if (nl_fixed(&r, 4) != 0) /* a CIE's id is 0 in .eh_frame */
        return -1;
    uint8_t version = (uint8_t)nl_fixed(&r, 1);
    const char *aug = (const char *)r.p;
    size_t aug_len = strnlen(aug, (size_t)(r.end - r.p));
    if (r.bad || aug_len == (size_t)(r.end - r.p) || (aug[0] == 'e' && aug[1] == 'h'))
        return -1;
    r.p += aug_len + 1;
    c->code_align = nl_uleb(&r);
    c->data_align = nl_sleb(&r);
    uint64_t ra_reg = version == 1 ? nl_fixed(&r, 1) : nl_uleb(&r);
    c->fde_enc = 0;
    c->has_z = aug[0] == 'z';
    c->signal = 0;
    if (c->has_z) {
        uint64_t n = nl_uleb(&r);
        const uint8_t *aug_end = r.p + n;
        for (const char *a = aug + 1; *a && !r.bad; a++) {
            if (*a == 'R')
                c->fde_enc = (uint8_t)nl_fixed(&r, 1);
            else if (*a == 'P')
                nl_skip_encoded(&r, (uint8_t)nl_fixed(&r, 1));
            else if (*a == 'L')
                nl_fixed(&r, 1);
            else if (*a == 'S')
                c->signal = 1;
            else
                break; /* unknown letters: the 'z' length still says where the data ends */
        }
        r.p = aug_end;
    }
    c->insns = r.p;
    c->end = r.end;
    return r.bad || ra_reg != NL_REG_RA || r.p > r.end ? -1 : 0;
}

/** Sets how @p reg is saved; only rbp and the return address are kept. */
static void nl_row_save(struct nl_cfi_row *row, uint64_t reg, int how, int64_t off)
{
    if (reg == NL_REG_RBP) {
        row->rbp_how = how;
        row->rbp_off = off;
    } else if (reg == NL_REG_RA) {
        row->ra_how = how;
        row->ra_off = off;
    }
}

static void nl_row_restore(struct nl_cfi_row *row, const struct nl_cfi_row *init, uint64_t reg)
{
    if (reg == NL_REG_RBP) {
        row->rbp_how = init->rbp_how;
        row->rbp_off = init->rbp_off;
    } else if (reg == NL_REG_RA) {
        row->ra_how = init->ra_how;
        row->ra_off = init->ra_off;
    }
}

#define NL_CFI_STACK 8

/**
 * Reads a DWARF expression of @p len bytes at r->p and steps past it. Returns 1 if it is
 * `DW_OP_breg6 (rbp) k`, followed by DW_OP_deref when @p deref, and sets @p k; else 0. These are
 * the two expressions gcc writes for a frame that realigns its stack (`and $-64, %rsp`, through
 * a copy of the incoming stack pointer in r10): the CFA is loaded from a slot at rbp - k, and rbp
 * is saved at rbp + 0.
 */
static int nl_rbp_expression(struct nl_cfi_reader *r, uint64_t len, int deref, int64_t *k)
{
    if (len > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return 0;
    }
    struct nl_cfi_reader e = {r->p, r->p + len, 0};
    r->p += len;
    if (e.p == e.end || *e.p++ != NL_OP_BREG_RBP)
        return 0;
    *k = nl_sleb(&e);
    if (deref && (e.p == e.end || *e.p++ != NL_OP_DEREF))
        return 0;
    return !e.bad && e.p == e.end;
}

/**
 * Runs the instructions in [r->p, r->end) while the location stays <= @p pc (every instruction
 * when @p init is NULL: a CIE's initial instructions). Returns 0, or -1 on what it cannot follow.
 */
static int nl_run_cfi(struct nl_cfi_reader *r, const struct nl_cie *c, uint64_t loc, uint64_t pc,
                      const struct nl_cfi_row *init, struct nl_cfi_row *row)
{
    struct nl_cfi_row saved[NL_CFI_STACK];
    unsigned depth = 0;
    while (r->p < r->end && !r->bad) {
        uint8_t op = *r->p++;
        uint64_t reg, delta = 0;
        switch (op >> 6) {
        case 1: delta = (op & 0x3f) * c->code_align; goto advance;
        case 2:
            nl_row_save(row, op & 0x3f, NL_SAVED_AT, (int64_t)nl_uleb(r) * c->data_align);
            continue;
        case 3:
            if (!init)
                return -1;
            nl_row_restore(row, init, op & 0x3f);
            continue;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x02: delta = nl_fixed(r, 1) * c->code_align; goto advance;
        case 0x03: delta = nl_fixed(r, 2) * c->code_align; goto advance;
        case 0x04: delta = nl_fixed(r, 4) * c->code_align; goto advance;
        case 0x05: /* offset_extended */
            reg = nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_AT, (int64_t)nl_uleb(r) * c->data_align);
            break;
        case 0x06: /* restore_extended */
            if (!init)
                return -1;
            nl_row_restore(row, init, nl_uleb(r));
            break;
        case 0x07: nl_row_save(row, nl_uleb(r), NL_SAVED_UNDEFINED, 0); break;
        case 0x08: nl_row_save(row, nl_uleb(r), NL_SAVED_SAME, 0); break;
        case 0x09: /* register: saved in another register */
            reg = nl_uleb(r);
            nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_OTHER, 0);
            break;
        case 0x0a:
            if (depth == NL_CFI_STACK)
                return -1;
            saved[depth++] = *row;
            break;
        case 0x0b: /* restore_state: the CFA too, as after an early epilogue */
            if (depth == 0)
                return -1;
            *row = saved[--depth];
            break;
        case 0x0c: /* def_cfa */
            reg = nl_uleb(r);
            row->cfa_reg = (int)reg;
            row->cfa_off = (int64_t)nl_uleb(r);
            break;
        case 0x0d: row->cfa_reg = (int)nl_uleb(r); break;
        case 0x0e: row->cfa_off = (int64_t)nl_uleb(r); break;
        case 0x0f: { /* def_cfa_expression */
            int64_t k = 0;
            int ok = nl_rbp_expression(r, nl_uleb(r), 1, &k);
            row->cfa_reg = ok ? NL_CFA_DEREF_RBP : -1;
            row->cfa_off = k;
            break;
        }
        case 0x10: { /* expression: the register is saved at the address it computes */
            int64_t k = 0;
            reg = nl_uleb(r);
            int ok = nl_rbp_expression(r, nl_uleb(r), 0, &k);
            nl_row_save(row, reg, ok ? NL_SAVED_AT_RBP : NL_SAVED_OTHER, k);
            break;
        }
        case 0x16: /* val_expression */
            reg = nl_uleb(r);
            r->p += nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_OTHER, 0);
            break;
        case 0x11: /* offset_extended_sf */
            reg = nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_AT, nl_sleb(r) * c->data_align);
            break;
        case 0x12: /* def_cfa_sf */
            reg = nl_uleb(r);
            row->cfa_reg = (int)reg;
            row->cfa_off = nl_sleb(r) * c->data_align;
            break;
        case 0x13: row->cfa_off = nl_sleb(r) * c->data_align; break;
        case 0x14: /* val_offset */
            reg = nl_uleb(r);
            nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_OTHER, 0);
            break;
        case 0x15: /* val_offset_sf */
            reg = nl_uleb(r);
            nl_sleb(r);
            nl_row_save(row, reg, NL_SAVED_OTHER, 0);
            break;
        case 0x2e: nl_uleb(r); break; /* GNU_args_size */
        case 0x2f: /* GNU_negative_offset_extended */
            reg = nl_uleb(r);
            nl_row_save(row, reg, NL_SAVED_AT, -(int64_t)nl_uleb(r) * c->data_align);
            break;
        default: return -1; /* set_loc and anything unknown */
        }
        continue;
    advance:
        loc += delta;
        if (init && loc > pc)
            break;
    }
    return r->bad || r->p > r->end ? -1 : 0;
}

/** The walk's rule from the row at the pc; -1 when it cannot be followed with loads alone. */
static int nl_row_rule(const struct nl_cfi_row *row, struct nl_frame_rule *out)
{
    memset(out, 0, sizeof *out);
    if (row->ra_how == NL_SAVED_UNDEFINED) {
        out->kind = NL_RULE_END; /* the outermost frame (_start, clone) */
        return 0;
    }
    /* Saved slots must lie below the CFA, so a walk reads only inside the frame. A CFA loaded
     * from memory is checked by the walk itself, as is the slot it comes from. */
    int deref = row->cfa_reg == NL_CFA_DEREF_RBP;
    if (deref ? (row->cfa_off < INT32_MIN || row->cfa_off > INT32_MAX)
              : ((row->cfa_reg != NL_REG_RSP && row->cfa_reg != NL_REG_RBP) ||
                 row->cfa_off <= 0 || row->cfa_off > INT32_MAX))
        return -1;
    if (row->ra_how != NL_SAVED_AT || row->ra_off > -8 || row->ra_off < INT8_MIN)
        return -1;
    if (row->rbp_how == NL_SAVED_AT && (row->rbp_off > -8 || row->rbp_off < INT16_MIN))
        return -1;
    if (row->rbp_how == NL_SAVED_AT_RBP && (row->rbp_off < INT16_MIN || row->rbp_off > INT16_MAX))
        return -1;
    if (row->rbp_how != NL_SAVED_SAME && row->rbp_how != NL_SAVED_AT &&
        row->rbp_how != NL_SAVED_AT_RBP)
        return -1;
    out->kind = NL_RULE_OK;
    out->cfa_is_rbp = row->cfa_reg == NL_REG_RBP;
    out->cfa_deref = deref;
    out->cfa_off = (int32_t)row->cfa_off;
    out->ra_off = (int8_t)row->ra_off;
    out->rbp_at_rbp = row->rbp_how == NL_SAVED_AT_RBP;
    out->rbp_off = row->rbp_how == NL_SAVED_SAME ? 0 : (int16_t)row->rbp_off;
    return 0;
}

int nl_cfi_rule(const void *fde, uint64_t func, uint64_t pc, struct nl_frame_rule *out)
{
    const uint8_t *f = fde;
    uint32_t len, cie_off;
    memcpy(&len, f, 4);
    if (len == 0 || len == 0xffffffffu)
        return -1;
    memcpy(&cie_off, f + 4, 4);
    struct nl_cie c;
    if (nl_parse_cie(f + 4 - cie_off, &c) != 0 || c.signal)
        return -1;
    struct nl_cfi_row init = {-1, 0, NL_SAVED_SAME, NL_SAVED_OTHER, 0, 0};
    struct nl_cfi_reader r = {c.insns, c.end, 0};
    if (nl_run_cfi(&r, &c, 0, 0, NULL, &init) != 0)
        return -1;
    r = (struct nl_cfi_reader){f + 8, f + 4 + len, 0};
    nl_skip_encoded(&r, c.fde_enc & 0x0f); /* pc_begin: libgcc already gave it as func */
    nl_skip_encoded(&r, c.fde_enc & 0x0f); /* pc_range */
    if (c.has_z)
        r.p += nl_uleb(&r);
    struct nl_cfi_row row = init;
    if (r.bad || nl_run_cfi(&r, &c, func, pc, &init, &row) != 0)
        return -1;
    return nl_row_rule(&row, out);
}
