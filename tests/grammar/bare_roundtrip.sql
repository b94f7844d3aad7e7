-- Golden fixture for SUQL's bare calls (ANSWER / SUMMARY declare bare_call = True).
-- Blocks separated by ';;'; each must parse with the stated number of calls in
-- its first-line comment and round-trip to an equal AST.
-- calls=1
SELECT name FROM r WHERE ANSWER(reviews, 'is it romantic?') = 'yes'
;;
-- calls=2
SELECT name, SUMMARY(reviews) AS s FROM r WHERE answer(r.reviews, 'kids?') = 'Yes' LIMIT 3
;;
-- calls=1
SELECT name FROM r ORDER BY LENGTH(SUMMARY(reviews)) DESC
;;
-- calls=2
SELECT LOWER(ANSWER(reviews, 'cuisine?')), {{LLMMap('q', r.name)}} FROM r
;;
-- calls=2
SELECT {{LLMMap('is it positive?', SUMMARY(r.reviews))}} FROM r
;;
-- calls=1
SELECT name FROM r WHERE ANSWER (reviews, 'spaced?') IN ('a', 'b')
;;
-- calls=0
SELECT t.answer(x), answers(1), summary_x(2), "ANSWER"(3), 'ANSWER(x)' FROM t
;;
-- calls=0
SELECT a -- SUMMARY(b)
FROM t /* ANSWER(c, 'd') */
;;
-- calls=1
SELECT CASE WHEN ANSWER(reviews, 'open?') = 'yes' THEN 1 ELSE 0 END FROM r
