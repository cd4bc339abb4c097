# Run by ctest as `cmake -DPROGRAM=flt-metatrain-es -DWORK=DIR -P metatrain_es_tiny.cmake`: a tiny
# campaign (episodes of 20 steps) checkpoints, its stop rule ends it (a margin no theta can beat)
# and says why in DIR/STOPPED, a second invocation does not advance it, --export-theta writes
# the theta it ended at beside best.pt, --export-best-parts writes best.pt's change split in two,
# and --fresh-validation scores best.pt again on the campaign's validation set as the campaign did
# (STOPPED's numbers) and on two fresh draws.
file(REMOVE_RECURSE "${WORK}")
set(flags --dir "${WORK}" --generations 5 --pairs 1 --episodes 1 --instances 2 --min-steps 20
          --max-steps 20 --validation-every 1 --validation-episodes 1 --memory none --stop-check 2
          --stop-margin 10)
function(run expect_text)
  execute_process(COMMAND "${PROGRAM}" ${flags} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expect_text}")
    message(FATAL_ERROR "flt-metatrain-es ${ARGN}: exit ${rc}, expected output matching "
                        "\"${expect_text}\", got:\n${out}\n${err}")
  endif()
endfunction()
run("stopped at generation 2 by the stop rule: the best validation score [0-9.]+ \\(generation [0-9]\\) has not beaten the hand rule's [0-9.]+ by 10")
file(STRINGS "${WORK}/log.tsv" lines)
list(LENGTH lines count)
if(NOT count EQUAL 3)
  message(FATAL_ERROR "log.tsv: expected a header and generations 0 and 1, got:\n${lines}")
endif()
foreach(file config.txt state.pt best.pt references.tsv STOPPED)
  if(NOT EXISTS "${WORK}/${file}")
    message(FATAL_ERROR "the campaign did not write ${file}")
  endif()
endforeach()
run("^stopped at generation 2 ")  # a stopped campaign prints why and does not step again
file(STRINGS "${WORK}/log.tsv" lines)
list(LENGTH lines count)
if(NOT count EQUAL 3)
  message(FATAL_ERROR "a stopped campaign stepped again: log.tsv has ${count} lines")
endif()
run("wrote theta of generation 2 to .*theta.pt; best.pt is generation [0-9]'s"
    --export-theta "${WORK}/theta.pt")
if(NOT EXISTS "${WORK}/theta.pt")
  message(FATAL_ERROR "--export-theta did not write ${WORK}/theta.pt")
endif()
file(READ "${WORK}/STOPPED" stopped)
string(REGEX MATCH "best validation score ([0-9.e-]+) \\(generation ([0-9]+)\\) has not beaten the hand rule's ([0-9.e-]+)" _ "${stopped}")
set(best "${CMAKE_MATCH_1}")
set(best_generation "${CMAKE_MATCH_2}")
set(hand_rule "${CMAKE_MATCH_3}")
string(REPLACE "." "[.]" best "${best}")
string(REPLACE "." "[.]" hand_rule "${hand_rule}")
run("wrote the hand rule moved by best.pt's \\(generation ${best_generation}'s\\) change in its step numbers only to .*parts-step-numbers.pt, in the rest only to .*parts-rest.pt"
    --export-best-parts "${WORK}/parts")
foreach(file parts-step-numbers.pt parts-rest.pt)
  if(NOT EXISTS "${WORK}/${file}")
    message(FATAL_ERROR "--export-best-parts did not write ${WORK}/${file}")
  endif()
endforeach()
run("best.pt \\(generation ${best_generation}'s theta\\).*the campaign's \\(it chose theta\\) +${hand_rule} +${best} .*fresh draw 1 .*fresh draw 2 .*fresh draws: mean lead [-+][0-9.]+, standard error [0-9.]+ over 2 sets\n  the same for the step numbers' change only: [-+][0-9.]+, [0-9.]+; for the rest's only: [-+][0-9.]+, [0-9.]+"
    --fresh-validation 2)
# The same from draw 5: the campaign's set again, then draws 5 and 6.
run("the campaign's \\(it chose theta\\) +${hand_rule} +${best} [^\n]*\n  fresh draw 5 [^\n]*\n  fresh draw 6 [^\n]*\n  fresh draws: mean lead [-+][0-9.]+, standard error [0-9.]+ over 2 sets"
    --fresh-validation 2 --fresh-from 5)
