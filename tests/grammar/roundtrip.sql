-- Golden fixture: every block (separated by a line holding only ';;') must
-- parse, and parse -> to_blendsql -> parse must give an equal AST with a
-- stable rendering.  This first block is itself a query.
SELECT 1
;;
SELECT name FROM w
WHERE school = 'university of georgia'
  AND {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE
;;
SELECT * FROM w WHERE city = <<LLMQA('Which city is 120 miles west of Sydney?',
    (SELECT * FROM documents WHERE documents MATCH 'sydney OR 120' ORDER BY rank LIMIT 3),
    options='w::city')>>
;;
SELECT {{LLMMap('Team?', w.team)}} AS team FROM w
;;
SELECT {{llmmap('lower case name', 'w::name')}}, {{LLMMAP('upper', 'w::name')}} FROM w
;;
SELECT * FROM w WHERE {{StartsWith('A', w.name)}} = 1
;;
SELECT * FROM w AS x WHERE {{LLMMap('alias column', x.name)}} = 'yes'
;;
SELECT * FROM w WHERE {{LLMMap('bare column', name)}} = TRUE
;;
SELECT {{LLMMap('k and flags', 'w::name', k=3, flag=FALSE, none=NULL, ratio=-0.5)}} FROM w
;;
SELECT {{LLMMap('options tuple', 'w::name', options=('a', 'b', 'c'))}} FROM w
;;
SELECT {{LLMMap('one-tuple trailing comma', 'w::name', options=('a',))}} FROM w
;;
SELECT {{LLMMap('one-tuple parens', 'w::name', options=('a'))}} FROM w
;;
SELECT {{LLMMap('example outputs', 'w::name', example_outputs=('x', 'y'), return_type='str')}} FROM w
;;
SELECT {{LLMMap('Name: ' || name, w.team)}} FROM w
;;
SELECT {{LLMMap('concat' || ' ' || 'twice', 'w::team')}} FROM w
;;
SELECT * FROM w WHERE name = {{LLMQA('Who?', (SELECT name FROM w WHERE {{LLMMap('nested?', 'w::team')}} = TRUE))}}
;;
SELECT * FROM w WHERE name IN {{LLMQA('Which names?', (SELECT name, (SELECT COUNT(*) FROM d WHERE d.x = w.y) FROM w), options='w::name')}}
;;
SELECT {{LLMQA('deep', (SELECT * FROM (SELECT {{LLMMap('level 2', (SELECT {{SUMMARY(d.body)}} FROM d LIMIT 1))}} FROM w)))}}
;;
SELECT {{LLMMap('nested call arg', {{SUMMARY(w.body)}})}} FROM w
;;
SELECT <<LLMMap('shift-brace nested', <<SUMMARY(w.body)>>)>> FROM w
;;
SELECT {{ANSWER(d.body, 'What is it?')}}, {{SUMMARY(d.body)}} FROM documents AS d
;;
SELECT * FROM w WHERE {{LLMValidate('Is it true?', (SELECT * FROM w))}} = TRUE
;;
SELECT * FROM t1 JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}}
;;
SELECT * FROM t1 LEFT JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b', question='same person?')}} WHERE t1.x > 2
;;
SELECT * FROM t1 JOIN {{LLMJoin('t1::a', 't2::b')}}
;;
SELECT * FROM t1 JOIN {{LLMJoin(left_on=t1.a, right_on=t2.b)}} JOIN t3 ON t3.id = t2.id
;;
SELECT * FROM t1 JOIN t2 ON {{LLMJoin(t1.a, t2.b)}}
;;
SELECT * FROM t1 JOIN t2 ON t1.id = t2.id AND {{LLMJoin('t1::a', 't2::b')}}
;;
SELECT * FROM t1 INNER JOIN <<LLMJoin(left_on='t1::a', right_on='main.t2::b')>>
;;
SELECT a << 2, b >> 1, 1 << 3 >> 1 FROM t
;;
SELECT x FROM t WHERE a <<b AND c >> d
;;
SELECT a << LLMQ(1) FROM t
;;
SELECT a <LLMMap, b < 3, c <= 4, d <> 5, e<<2, f<<(SELECT 1) FROM t
;;
SELECT a << (SELECT 1), <<LLMQA('then a call')>> << 2 FROM t
;;
SELECT * FROM t WHERE a GLOB 'x*' AND b NOT GLOB '[0-9]*'
;;
SELECT * FROM documents WHERE documents MATCH 'sydney OR 120' ORDER BY rank LIMIT 3
;;
SELECT title, bm25(documents) AS score FROM documents WHERE documents MATCH 'x' ORDER BY score
;;
SELECT '{{LLMMap(''not a call'', t.c)}}', '<<LLMQA(''no'')>>' FROM t
;;
SELECT 'back\slash', 'ends with backslash\', 'it''s' FROM t
;;
SELECT "quoted col", [bracket col], `tick col`, "with ""quote""" FROM "my table"
;;
SELECT "{{LLMMap('x', y)}}" FROM t
;;
SELECT a -- trailing comment with {{LLMMap( and '
FROM t
;;
SELECT /* block {{ comment }} */ a FROM t /* another */
;;
SELECT {{LLMMap('comment inside', /* note */ w.name)}} FROM w
;;
WITH pitchers AS (
  SELECT * FROM w WHERE {{LLMMap('pitcher?', 'w::position')}} = TRUE
)
SELECT name FROM pitchers ORDER BY name
;;
SELECT name, ROW_NUMBER() OVER (PARTITION BY team ORDER BY {{LLMMap('score', 'w::name')}} DESC) AS rn FROM w
;;
SELECT CASE WHEN {{LLMMap('big?', w.size)}} = TRUE THEN 'big' ELSE 'small' END FROM w
;;
SELECT * FROM w WHERE team IN ('a', 'b') AND {{LLMMap('in list', w.team)}} IN ('x', 'y')
;;
SELECT * FROM w WHERE team IN ({{LLMQA('one team')}}, 'b')
;;
SELECT team, COUNT(*) FROM w GROUP BY {{LLMMap('group', w.team)}} HAVING COUNT(*) > {{LLMQA('how many?')}}
;;
SELECT * FROM w ORDER BY {{LLMMap('rank', w.name)}} LIMIT 10 OFFSET 5
;;
SELECT * FROM w WHERE a = ? AND {{LLMMap(?, w.name)}} = ? AND b = :named
;;
SELECT * FROM w WHERE {{LLMQA(?, (SELECT * FROM d WHERE d.k = ?))}} = 'x' LIMIT ?
;;
SELECT * FROM w WHERE NOT {{LLMMap('negated', w.name)}} OR {{LLMMap('other', w.team)}}
;;
SELECT DISTINCT {{LLMMap('distinct', w.name)}} FROM w
;;
SELECT * FROM w WHERE x BETWEEN 1 AND 2 AND y LIKE 'a%' ESCAPE '\' AND z IS NOT NULL
;;
SELECT * FROM w
WHERE {{
  LLMMap(
    'multi-line call',
    'w::name'
  )
}} = TRUE
;;
SELECT {{ LLMMap ( 'spaces around' , w.name ) }} FROM w
;;
SELECT * FROM w WHERE {{LLMMap('schema col', 'w::school/club team')}} = 'x'
;;
SELECT * FROM w WHERE {{LLMMap('question with :: inside?', w.name)}} = TRUE
;;
SELECT * FROM a UNION SELECT * FROM b WHERE {{LLMMap('union', b.x)}}
;;
SELECT * FROM w WHERE w.x = (SELECT MAX(y) FROM v WHERE {{LLMMap('correlated', v.z)}} = w.x)
;;
SELECT * FROM w WHERE EXISTS (SELECT 1 FROM v WHERE {{LLMMap('exists', v.z)}})
;;
SELECT COALESCE({{LLMMap('coalesce', w.a)}}, 0) + 1 FROM w
;;
SELECT CAST({{LLMMap('cast', w.a)}} AS INTEGER) FROM w
;;
SELECT * FROM w;
;;
SELECT {{LLMMap('q', (SELECT a FROM t WHERE b = 'x' UNION SELECT c FROM u))}} FROM w
;;
SELECT {{LLMQA('table arg', w)}} FROM w
;;
SELECT {{LLMMap()}} FROM w
;;
SELECT {{LLMMap('q', options=='x', (a = 1), "k"=1, t.k = 2)}} FROM t
