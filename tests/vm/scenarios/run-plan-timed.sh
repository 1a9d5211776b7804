# numalens run --plan with an online policy's timed moves: master-init (built with numalens cc,
# one OpenMP thread per node; thread 0 first-touches the whole grid, each thread then uses its
# own block) is recorded with exact counts, an online kMAF plan is made from it in the guest
# (the grid on node 0 at first, its blocks moved to their threads' nodes as the threads' accesses
# outweigh thread 0's first writes, as `migrate_at` entries; SPM's observation, a quarter of the
# run, would see little more than thread 0's initialisation here), and a second run applies it:
# the timed moves must move pages between nodes for real while the program runs.
R=$OUT/results.txt
ARGS="--n 1048576 --threads 4 --iters 64"
export OMP_PROC_BIND=close OMP_PLACES=cores

timeout 120 numalens record --backend inst -o /tmp/first.numalens master_init_inst $ARGS \
    > $OUT/timed-first.txt 2>&1 ||
    echo "FAIL timed-first-record: $(tail -3 $OUT/timed-first.txt | tr '\n' ' ')" >> $R
if numalens plan /tmp/first.numalens --policy kmaf-online -o $OUT/timed.json \
    > $OUT/timed-plan.txt 2>&1 && grep -q '"migrate_at"' $OUT/timed.json; then
    echo "PASS timed-plan-has-timed-moves ($(grep -c '"time_s"' $OUT/timed.json) entries)" >> $R
else
    echo "FAIL timed-plan-has-timed-moves: $(tail -3 $OUT/timed-plan.txt | tr '\n' ' ')" >> $R
fi
timeout 120 numalens run --plan $OUT/timed.json -o $OUT/timed.numalens master_init_inst $ARGS \
    > $OUT/timed-run.txt 2>&1
status=$?
[ $status = 0 ] && echo "PASS timed-run-exit-status" >> $R ||
    echo "FAIL timed-run-exit-status: $status: $(tail -3 $OUT/timed-run.txt | tr '\n' ' ')" >> $R
# "plan: A of B timed object moves made: P pages asked, Q placed (R were there already), S refused"
line=$(grep "timed object moves made" $OUT/timed-run.txt)
placed=$(echo "$line" | sed -n 's/.* asked, \([0-9]*\) placed (\([0-9]*\) were there.*/\1/p')
there=$(echo "$line" | sed -n 's/.* asked, \([0-9]*\) placed (\([0-9]*\) were there.*/\2/p')
if [ -n "$placed" ] && [ "$placed" -gt "${there:-0}" ]; then
    echo "PASS timed-moves-moved-pages ($((placed - there)) pages moved to another node)" >> $R
else
    echo "FAIL timed-moves-moved-pages: ${line:-no summary}" >> $R
fi
cat $OUT/timed-run.txt
cat $R
