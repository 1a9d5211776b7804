// SPDX-License-Identifier: MIT OR Apache-2.0
//
// An LLVM pass plugin (clang -fpass-plugin=) for clang builds whose hooks are inlined by full
// link-time optimisation: one step of the sampling countdowns for each run of plain accesses in
// a block, instead of one per access.
//
// clang's ThreadSanitizer pass puts a call to __tsan_readN/__tsan_writeN before each load and
// store; the link inlines the hooks, and each access then loads the thread's mode word, steps
// a countdown in thread-local memory (a load and a store the next access waits for) and tests
// the exact bit. Here, right after ThreadSanitizer has instrumented a function, each run of two
// or more plain access calls with no other call between them (arithmetic intrinsics aside) is
// taken out of its place and put at the run's end, behind one test:
//
//   fast = nl_fast
//   if (fast == EXACT)       -> __numalens_count_{read,write}(address, words) for each access
//                                                                  (counting only: the hooks'
//                                                                   exact path, inlined)
//   if (fast & EXACT)        -> the run's calls, in order         (counting and sampling)
//   else if (!(fast & SAMPLE)) -> nothing                         (not recorded)
//   else if (countdown_read - R > 0 && countdown_write - W > 0)
//                            -> countdowns -= R and W             (no sample due in the run)
//   else                     -> the run's calls, in order         (a sample due: each call steps
//                                                                   and samples as it always did)
//
// R and W are the run's reads and writes in 8-byte words (nl_words in inst.h). The calls keep
// their debug locations, so a sample's instruction address names its access's line. A thread
// takes the same samples as without the pass: the countdowns reach the same values, and the run
// whose step would cross zero replays its accesses one by one. The calls come at the end of the
// run rather than before each access; no other call lies between, so nothing but a signal
// handler can tell (and a fault in the run: a program that recovers from it with siglongjmp
// loses the run's counts).
//
// ThreadSanitizer runs at the end of clang's per-module pipeline, after any pass a plugin can
// add there, so the runs are found in an instrumentation callback after each of its runs on a
// function.

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"

#include <vector>

#include "fast_path.h"

using namespace llvm;

namespace {

struct Access {
    CallInst *call;
    bool is_write;
    uint64_t words;
};

// The run's calls and the instruction the run ends before.
struct Run {
    std::vector<Access> accesses;
    Instruction *end;
};

// Whether @p c is a plain access hook (__tsan_[unaligned_]{read,write}{1,2,4,8,16}); its kind
// and words then.
bool plain_access(const CallInst *c, Access &a)
{
    const Function *f = c->getCalledFunction();
    if (!f)
        return false;
    StringRef n = f->getName();
    if (!n.consume_front("__tsan_"))
        return false;
    n.consume_front("unaligned_");
    if (n.consume_front("read"))
        a.is_write = false;
    else if (n.consume_front("write"))
        a.is_write = true;
    else
        return false;
    unsigned size;
    if (n.getAsInteger(10, size) || (size != 1 && size != 2 && size != 4 && size != 8 && size != 16))
        return false;
    a.words = size > 8 ? size / 8 : 1;
    return true;
}

// Whether @p i ends a run: a call that could see or change the hooks' state (any call but the
// intrinsics without side effects: arithmetic, debug records, lifetime markers, assumptions).
bool ends_run(Instruction &i)
{
    if (i.isTerminator())
        return true;
    auto *cb = dyn_cast<CallBase>(&i);
    if (!cb)
        return false;
    auto *ii = dyn_cast<IntrinsicInst>(&i);
    if (!ii)
        return true;
    switch (ii->getIntrinsicID()) {
    case Intrinsic::lifetime_start:
    case Intrinsic::lifetime_end:
    case Intrinsic::assume:
        return false;
    default:
        return !isa<DbgInfoIntrinsic>(ii) && ii->mayHaveSideEffects();
    }
}

// The runtime's thread-local variables (inst.h), declared as the hooks declare them; null if
// the module has one of their names with another type.
GlobalVariable *runtime_tls(Module &m, StringRef name, Type *type)
{
    if (GlobalVariable *g = m.getNamedGlobal(name))
        return g->getValueType() == type && g->isThreadLocal() ? g : nullptr;
    if (m.getNamedValue(name))
        return nullptr;
    return new GlobalVariable(m, type, false, GlobalValue::ExternalLinkage, nullptr, name,
                              nullptr, GlobalValue::InitialExecTLSModel);
}

struct State {
    GlobalVariable *fast, *countdown_read, *countdown_write;
    FunctionCallee count_read, count_write;
};

// Puts @p run behind one step of the countdowns, before its end.
void step_once(Run &run, const State &s)
{
    uint64_t reads = 0, writes = 0;
    for (const Access &a : run.accesses)
        (a.is_write ? writes : reads) += a.words;
    BasicBlock *head = run.end->getParent();
    Function *f = head->getParent();
    LLVMContext &ctx = f->getContext();
    BasicBlock *tail = head->splitBasicBlock(run.end, head->getName() + ".nl.after");
    BasicBlock *other_modes = BasicBlock::Create(ctx, "nl.other_modes", f, tail);
    BasicBlock *counts = BasicBlock::Create(ctx, "nl.counts", f, tail);
    BasicBlock *not_counting = BasicBlock::Create(ctx, "nl.not_counting", f, tail);
    BasicBlock *step = BasicBlock::Create(ctx, "nl.step", f, tail);
    BasicBlock *stepped = BasicBlock::Create(ctx, "nl.stepped", f, tail);
    BasicBlock *calls = BasicBlock::Create(ctx, "nl.calls", f, tail);
    head->getTerminator()->eraseFromParent();

    IRBuilder<> b(head);
    Type *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty();
    Value *fast = b.CreateLoad(i32, s.fast, "nl.fast");
    b.CreateCondBr(b.CreateICmpEQ(fast, b.getInt32(NL_FAST_EXACT)), counts, other_modes);

    b.SetInsertPoint(other_modes);
    Value *exact = b.CreateICmpNE(b.CreateAnd(fast, NL_FAST_EXACT), b.getInt32(0));
    b.CreateCondBr(exact, calls, not_counting);

    b.SetInsertPoint(counts);
    for (const Access &a : run.accesses) {
        FunctionCallee count = a.is_write ? s.count_write : s.count_read;
        CallInst *c = b.CreateCall(count, {a.call->getArgOperand(0), b.getInt64(a.words)});
        c->setDebugLoc(a.call->getDebugLoc());
    }
    b.CreateBr(tail);

    b.SetInsertPoint(not_counting);
    Value *sampling = b.CreateICmpNE(b.CreateAnd(fast, NL_FAST_SAMPLE), b.getInt32(0));
    b.CreateCondBr(sampling, step, tail);

    b.SetInsertPoint(step);
    Value *read_left = b.CreateSub(b.CreateLoad(i64, s.countdown_read), b.getInt64(reads));
    Value *write_left = b.CreateSub(b.CreateLoad(i64, s.countdown_write), b.getInt64(writes));
    Value *due = b.CreateOr(b.CreateICmpSLE(read_left, b.getInt64(0)),
                            b.CreateICmpSLE(write_left, b.getInt64(0)));
    // A sample falls due once in thousands of accesses.
    b.CreateCondBr(due, calls, stepped, MDBuilder(ctx).createBranchWeights(1, 1000));

    b.SetInsertPoint(stepped);
    if (reads)
        b.CreateStore(read_left, s.countdown_read);
    if (writes)
        b.CreateStore(write_left, s.countdown_write);
    b.CreateBr(tail);

    b.SetInsertPoint(calls);
    // An empty asm after the last call: a run that ends at the function's return would
    // otherwise leave its last inlined hook in tail position, and the sample it takes would
    // name the caller (a hook tail-calls its sampling path, which records its own return
    // address: NL_TAIL_IP in hooks.c).
    FunctionType *nothing = FunctionType::get(b.getVoidTy(), false);
    CallInst *barrier = b.CreateCall(InlineAsm::get(nothing, "", "", /*hasSideEffects=*/true));
    b.CreateBr(tail);
    for (Access &a : run.accesses)
        a.call->moveBefore(barrier);
}

// The runs of @p f, in order.
std::vector<Run> runs_of(Function &f)
{
    std::vector<Run> runs;
    for (BasicBlock &bb : f) {
        std::vector<Access> accesses;
        for (Instruction &i : bb) {
            Access a{};
            auto *c = dyn_cast<CallInst>(&i);
            if (c && plain_access(c, a)) {
                a.call = c;
                accesses.push_back(a);
            } else if (ends_run(i)) {
                if (accesses.size() >= 2)
                    runs.push_back({accesses, &i});
                accesses.clear();
            }
        }
    }
    return runs;
}

void step_runs(Function &f)
{
    if (f.isDeclaration() || !f.hasFnAttribute(Attribute::SanitizeThread))
        return;
    std::vector<Run> runs = runs_of(f);
    if (runs.empty())
        return;
    Module &m = *f.getParent();
    Type *i32 = Type::getInt32Ty(m.getContext()), *i64 = Type::getInt64Ty(m.getContext());
    State s{runtime_tls(m, "nl_fast", i32), runtime_tls(m, "nl_countdown_read", i64),
            runtime_tls(m, "nl_countdown_write", i64), {}, {}};
    if (!s.fast || !s.countdown_read || !s.countdown_write)
        return;
    // The address operand as ThreadSanitizer passes it (i8*), and the words.
    Type *address = runs.front().accesses.front().call->getArgOperand(0)->getType();
    FunctionType *count = FunctionType::get(Type::getVoidTy(m.getContext()), {address, i64}, false);
    s.count_read = m.getOrInsertFunction("__numalens_count_read", count);
    s.count_write = m.getOrInsertFunction("__numalens_count_write", count);
    // A later run's calls and end are in the block the one before left after it.
    for (Run &run : runs)
        step_once(run, s);
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
    return {LLVM_PLUGIN_API_VERSION, "numalens-steps", "1", [](PassBuilder &pb) {
                PassInstrumentationCallbacks *callbacks = pb.getPassInstrumentationCallbacks();
                if (!callbacks)
                    return;
                callbacks->registerAfterPassCallback(
                    [](StringRef pass, Any ir, const PreservedAnalyses &) {
                        if (pass != "ThreadSanitizerPass" || !any_isa<const Function *>(ir))
                            return;
                        // The callback is handed the function ThreadSanitizer changed.
                        step_runs(*const_cast<Function *>(any_cast<const Function *>(ir)));
                    });
            }};
}
