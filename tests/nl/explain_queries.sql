SELECT name FROM singer
;;
SELECT name, age FROM singer WHERE age > 30
;;
SELECT count(*) FROM singer WHERE country = 'France'
;;
SELECT avg(age), min(age), max(age) FROM singer WHERE country = 'France'
;;
SELECT DISTINCT country FROM singer WHERE age > 20
;;
SELECT name FROM singer ORDER BY age DESC LIMIT 3
;;
SELECT name FROM singer ORDER BY age LIMIT 1
;;
SELECT country, count(*) FROM singer GROUP BY country
;;
SELECT country FROM singer GROUP BY country HAVING count(*) > 2
;;
SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id
;;
SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)
;;
SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)
;;
SELECT name FROM singer WHERE age BETWEEN 20 AND 30
;;
SELECT name FROM singer WHERE country = 'France' OR country = 'Netherlands'
;;
SELECT name FROM singer WHERE NOT is_male = 'T'
;;
SELECT name FROM singer WHERE song_name LIKE '%Hey%'
;;
SELECT name FROM singer WHERE country IN ('France', 'Netherlands')
;;
SELECT name FROM singer WHERE age IS NULL
;;
WITH young AS (SELECT * FROM singer WHERE age < 30) SELECT DISTINCT country FROM young
;;
SELECT country FROM singer WHERE age > 40 INTERSECT SELECT country FROM singer WHERE age < 30
;;
SELECT name FROM singer UNION SELECT name FROM stadium
;;
SELECT name FROM singer EXCEPT SELECT name FROM stadium
;;
SELECT t.country FROM (SELECT country, count(*) AS n FROM singer GROUP BY country) AS t WHERE t.n > 1
;;
SELECT name, CASE WHEN age > 30 THEN 'old' ELSE 'young' END FROM singer
;;
SELECT capacity - average AS spare FROM stadium ORDER BY spare DESC LIMIT 2 OFFSET 1
;;
SELECT name FROM w WHERE school = 'university of georgia' AND {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE
;;
SELECT {{LLMMap('What continent is this country in?', 'singer::country')}} AS continent, name FROM singer
;;
SELECT * FROM w WHERE city = <<LLMQA('Which city is 120 miles west of Sydney?', (SELECT * FROM documents WHERE documents MATCH 'sydney OR 120' ORDER BY rank LIMIT 3), options='w::city')>>
;;
SELECT {{LLMQA('Who won the final?', (SELECT * FROM w WHERE round = 'Final'))}}
;;
SELECT * FROM w JOIN {{LLMJoin(left_on='w::player', right_on='documents::title')}}
;;
SELECT w.player, d.content FROM w JOIN documents AS d ON {{LLMJoin(w.player, d.title)}}
;;
SELECT name FROM restaurants WHERE {{ANSWER(reviews, 'Is it romantic?')}} = 'yes' LIMIT 3
;;
SELECT name, {{SUMMARY(reviews)}} FROM restaurants LIMIT 1
;;
SELECT name FROM singer WHERE {{LLMValidate('Is this a famous singer?', (SELECT * FROM singer AS s WHERE s.name = 'Joe Sharp'))}} = TRUE
;;
SELECT name FROM singer WHERE age > ? AND country = ?
;;
SELECT country, count(*) AS n FROM singer WHERE {{LLMMap('Is this country in Europe?', 'singer::country')}} = TRUE GROUP BY country ORDER BY n DESC

;;
SELECT name FROM singer WHERE (age > 30 OR country = 'France') AND name = 'Joe'
;;
SELECT name FROM singer WHERE age > 30 OR country = 'France' AND name = 'Joe' OR song_name LIKE '%Love%'
