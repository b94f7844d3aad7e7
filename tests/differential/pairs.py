"""The differential query pairs: a BlendSQL query and its plain-SQLite twin.

Each :class:`Pair` is data. The twin replaces every ingredient by the SQL
expression it is equivalent to (see ``ingredients.py``), so for a correct
engine both return the same rows. Optional value expectations are plain SQL
queries over the same database, keyed by ingredient:

- ``"Name"``: all values passed to that ingredient (union over its calls);
- ``"Name:question"``: only calls whose question is ``question``;
- ``"Name.right"``: right-hand values of a join ingredient.

``exact`` -- the distinct values passed must equal this set: used only where
ARCHITECTURE.md promises it (one uncomputed map call in its SELECT scope, with
AND-connected plain predicates, joins, CTE / derived-table filters).
``within`` -- the values passed must be a subset (the relaxed candidate set).
``needs`` -- the values passed must include this set (what any correct plan
must look at, e.g. for AND cascades: rows where the *other* predicates hold).
``cascade`` -- two AND-connected ingredient predicates in one scope, as
``(key, sql_if_computed_first, sql_if_computed_second)``: ARCHITECTURE.md §3
promises that one of them sees every candidate row and the other only the
rows that passed it, in either order.

See README.md in this folder for how to add a pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pair:
    """One differential case. ``order``: ``"any"`` (multiset), ``"exact"`` (list),
    or ``"sample"`` (a LIMIT without a total order: the rows must be as many as
    the twin's and all come from ``sample_of``, the twin without its LIMIT)."""

    id: str
    db: str
    query: str
    twin: str
    params: tuple[Any, ...] = ()
    order: str = "any"
    sample_of: str | None = None
    exact: dict[str, str] = field(default_factory=dict)
    within: dict[str, str] = field(default_factory=dict)
    needs: dict[str, str] = field(default_factory=dict)
    cascade: tuple[tuple[str, str, str], ...] = ()
    once: tuple[str, ...] = ()  # keys whose values are passed at most once in the query


CS = "concert_singer"
PETS = "pets_1"
CAR = "car_1"
WORLD = "world_1"
EMP = "employee_hire_evaluation"
FLY = "flight_2"

ALL_SINGER_NAMES = "SELECT DISTINCT Name FROM singer WHERE Name IS NOT NULL"

PAIRS: list[Pair] = [
    # ---------------------------------------------------------------- WHERE
    Pair(
        "where_map_paper_ref", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', 'singer::Name')}} = TRUE",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "where_map_and_plain", CS,
        "SELECT Name FROM singer WHERE Age > 30 AND {{StartsWith('J', singer.Name)}} = TRUE",
        "SELECT Name FROM singer WHERE Age > 30 AND substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE Age > 30"},
    ),
    Pair(
        "where_bare_predicate_int_column", PETS,
        "SELECT StuID FROM Student WHERE {{StartsWith('2', Student.Age)}}",
        "SELECT StuID FROM Student WHERE substr(CAST(Age AS TEXT), 1, 1) = '2'",
        exact={"StartsWith": "SELECT DISTINCT Age FROM Student WHERE Age IS NOT NULL"},
    ),
    Pair(
        "where_real_column_text", PETS,
        "SELECT PetID FROM Pets WHERE {{StartsWith('1', Pets.weight)}} = TRUE",
        "SELECT PetID FROM Pets WHERE substr(CAST(weight AS TEXT), 1, 1) = '1'",
        exact={"StartsWith": "SELECT DISTINCT weight FROM Pets WHERE weight IS NOT NULL"},
    ),
    Pair(
        "where_text_typed_numbers", CAR,
        "SELECT COUNT(*) FROM cars_data WHERE {{StartsWith('1', cars_data.MPG)}} = TRUE",
        "SELECT COUNT(*) FROM cars_data WHERE substr(MPG, 1, 1) = '1'",
        exact={"StartsWith": "SELECT DISTINCT MPG FROM cars_data WHERE MPG IS NOT NULL"},
    ),
    Pair(
        "where_nulls_never_passed", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('E', country.HeadOfState)}} = TRUE",
        "SELECT Code FROM country WHERE substr(HeadOfState, 1, 1) = 'E'",
        exact={"StartsWith": "SELECT DISTINCT HeadOfState FROM country "
                             "WHERE HeadOfState IS NOT NULL"},
    ),
    Pair(
        "where_int_nulls_and_plain", WORLD,
        "SELECT Name FROM country WHERE {{StartsWith('19', country.IndepYear)}} = TRUE "
        "AND Region = 'Caribbean'",
        "SELECT Name FROM country WHERE substr(CAST(IndepYear AS TEXT), 1, 2) = '19' "
        "AND Region = 'Caribbean'",
        exact={"StartsWith": "SELECT DISTINCT IndepYear FROM country "
                             "WHERE Region = 'Caribbean' AND IndepYear IS NOT NULL"},
    ),
    Pair(
        "where_float_column", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('7', country.LifeExpectancy)}} = TRUE "
        "AND Continent = 'Europe'",
        "SELECT Code FROM country WHERE substr(CAST(LifeExpectancy AS TEXT), 1, 1) = '7' "
        "AND Continent = 'Europe'",
        exact={"StartsWith": "SELECT DISTINCT LifeExpectancy FROM country "
                             "WHERE Continent = 'Europe' AND LifeExpectancy IS NOT NULL"},
    ),
    Pair(
        "where_map_numeric_comparison", CS,
        "SELECT Name FROM singer WHERE {{Length(singer.Song_Name)}} >= 4",
        "SELECT Name FROM singer WHERE length(Song_Name) >= 4",
        exact={"Length": "SELECT DISTINCT Song_Name FROM singer WHERE Song_Name IS NOT NULL"},
    ),
    Pair(
        "where_map_equals_string", WORLD,
        "SELECT Language FROM countrylanguage WHERE CountryCode = 'CHE' "
        "AND {{Upper(countrylanguage.Language)}} = 'GERMAN'",
        "SELECT Language FROM countrylanguage WHERE CountryCode = 'CHE' "
        "AND upper(Language) = 'GERMAN'",
        exact={"Upper": "SELECT DISTINCT Language FROM countrylanguage WHERE CountryCode = 'CHE'"},
    ),
    Pair(
        "where_upper_non_ascii", WORLD,
        "SELECT Code, {{Upper(country.Name)}} FROM country WHERE Region = 'Western Africa'",
        "SELECT Code, upper(Name) FROM country WHERE Region = 'Western Africa'",
        exact={"Upper": "SELECT DISTINCT Name FROM country WHERE Region = 'Western Africa'"},
    ),
    Pair(
        "where_concat_argument", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('Mr J', 'Mr ' || singer.Name)}} = TRUE",
        "SELECT Name FROM singer WHERE substr('Mr ' || Name, 1, 4) = 'Mr J'",
        exact={"StartsWith": "SELECT DISTINCT 'Mr ' || Name FROM singer WHERE Name IS NOT NULL"},
    ),
    Pair(
        "where_two_columns_concat", CS,
        "SELECT Singer_ID FROM singer WHERE {{Length(singer.Name || singer.Country)}} > 17",
        "SELECT Singer_ID FROM singer WHERE length(Name || Country) > 17",
        exact={"Length": "SELECT DISTINCT Name || Country FROM singer "
                         "WHERE Name || Country IS NOT NULL"},
    ),
    Pair(
        "where_compare_two_ingredients", EMP,
        "SELECT Name FROM employee WHERE {{Length(employee.Name)}} > {{Length(employee.City)}} * 2",
        "SELECT Name FROM employee WHERE length(Name) > length(City) * 2",
        within={"Length": "SELECT Name FROM employee UNION SELECT City FROM employee"},
    ),
    # ------------------------------------------------------ AND / OR / NOT
    Pair(
        "and_two_ingredients_cascade", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
        "AND {{Length(singer.Country)}} > 6",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' AND length(Country) > 6",
        within={"StartsWith": ALL_SINGER_NAMES,
                "Length": "SELECT DISTINCT Country FROM singer"},
        needs={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE length(Country) > 6",
               "Length": "SELECT DISTINCT Country FROM singer WHERE substr(Name, 1, 1) = 'J'"},
        cascade=(
            ("StartsWith", ALL_SINGER_NAMES,
             "SELECT DISTINCT Name FROM singer WHERE length(Country) > 6"),
            ("Length", "SELECT DISTINCT Country FROM singer",
             "SELECT DISTINCT Country FROM singer WHERE substr(Name, 1, 1) = 'J'"),
        ),
    ),
    Pair(
        "or_both_branches_same_ingredient", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
        "OR {{StartsWith('T', singer.Name)}} = TRUE",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' OR substr(Name, 1, 1) = 'T'",
        within={"StartsWith:J": ALL_SINGER_NAMES, "StartsWith:T": ALL_SINGER_NAMES},
        needs={"StartsWith:J": "SELECT Name FROM singer WHERE substr(Name, 1, 1) <> 'T'",
               "StartsWith:T": "SELECT Name FROM singer WHERE substr(Name, 1, 1) <> 'J'"},
    ),
    Pair(
        "or_ingredient_and_plain", CS,
        "SELECT Name FROM singer WHERE Age < 30 OR {{Length(singer.Name)}} > 11",
        "SELECT Name FROM singer WHERE Age < 30 OR length(Name) > 11",
        within={"Length": ALL_SINGER_NAMES},
        needs={"Length": "SELECT Name FROM singer WHERE NOT Age < 30"},
    ),
    Pair(
        "not_ingredient_and_plain", CS,
        "SELECT Name FROM singer WHERE NOT {{StartsWith('J', singer.Name)}} = TRUE AND Age > 30",
        "SELECT Name FROM singer WHERE NOT substr(Name, 1, 1) = 'J' AND Age > 30",
        exact={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE Age > 30"},
    ),
    Pair(
        "not_three_valued_logic", WORLD,
        "SELECT Code FROM country WHERE NOT {{StartsWith('E', country.HeadOfState)}}",
        "SELECT Code FROM country WHERE NOT substr(HeadOfState, 1, 1) = 'E'",
        exact={"StartsWith": "SELECT DISTINCT HeadOfState FROM country "
                             "WHERE HeadOfState IS NOT NULL"},
    ),
    Pair(
        "not_over_or_of_ingredients", FLY,
        "SELECT City FROM airports WHERE NOT ({{StartsWith('A', airports.City)}} = TRUE "
        "OR {{Length(airports.City)}} > 8)",
        "SELECT City FROM airports WHERE NOT (substr(City, 1, 1) = 'A' OR length(City) > 8)",
        within={"StartsWith": "SELECT City FROM airports", "Length": "SELECT City FROM airports"},
        needs={"StartsWith": "SELECT City FROM airports WHERE NOT length(City) > 8",
               "Length": "SELECT City FROM airports WHERE NOT substr(City, 1, 1) = 'A'"},
    ),
    Pair(
        "or_inside_and", FLY,
        "SELECT AirportCode FROM airports WHERE Country = 'United States' AND "
        "({{StartsWith('Ab', airports.City)}} OR {{StartsWith('Al', airports.City)}})",
        "SELECT AirportCode FROM airports WHERE Country = 'United States' AND "
        "(substr(City, 1, 2) = 'Ab' OR substr(City, 1, 2) = 'Al')",
        within={"StartsWith": "SELECT City FROM airports WHERE Country = 'United States'"},
    ),
    Pair(
        "not_and_or_mixed", WORLD,
        "SELECT Code FROM country WHERE Continent = 'Africa' AND NOT "
        "({{StartsWith('M', country.Name)}} = TRUE AND Population > 1000000) "
        "OR {{Length(country.Code2)}} = 3",
        "SELECT Code FROM country WHERE Continent = 'Africa' AND NOT "
        "(substr(Name, 1, 1) = 'M' AND Population > 1000000) OR length(Code2) = 3",
        within={"StartsWith": "SELECT Name FROM country", "Length": "SELECT Code2 FROM country"},
    ),
    # -------------------------------------------------------- SELECT list
    Pair(
        "select_list_map", CS,
        "SELECT Name, {{Length(singer.Name)}} AS n FROM singer WHERE Country = 'France'",
        "SELECT Name, length(Name) AS n FROM singer WHERE Country = 'France'",
        exact={"Length": "SELECT DISTINCT Name FROM singer WHERE Country = 'France'"},
    ),
    Pair(
        "select_and_where_same_call", CS,
        "SELECT Name, {{Length(singer.Name)}} FROM singer WHERE {{Length(singer.Name)}} > 10",
        "SELECT Name, length(Name) FROM singer WHERE length(Name) > 10",
        within={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "select_distinct_map", CS,
        "SELECT DISTINCT {{StartsWith('F', singer.Country)}} FROM singer",
        "SELECT DISTINCT substr(Country, 1, 1) = 'F' FROM singer",
        exact={"StartsWith": "SELECT DISTINCT Country FROM singer WHERE Country IS NOT NULL"},
    ),
    Pair(
        "select_case_when_map", CS,
        "SELECT Name, CASE WHEN {{StartsWith('J', singer.Name)}} THEN 'j' ELSE 'other' END "
        "FROM singer",
        "SELECT Name, CASE WHEN substr(Name, 1, 1) = 'J' THEN 'j' ELSE 'other' END FROM singer",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "select_case_several_ingredients", CAR,
        "SELECT Maker, CASE WHEN {{Length(car_makers.Maker)}} > 5 "
        "THEN {{Upper(car_makers.Maker)}} ELSE car_makers.FullName END FROM car_makers",
        "SELECT Maker, CASE WHEN length(Maker) > 5 THEN upper(Maker) ELSE FullName END "
        "FROM car_makers",
        exact={"Length": "SELECT DISTINCT Maker FROM car_makers"},
        within={"Upper": "SELECT DISTINCT Maker FROM car_makers"},
        needs={"Upper": "SELECT Maker FROM car_makers WHERE length(Maker) > 5"},
    ),
    Pair(
        "select_upper_order_alias", PETS,
        "SELECT {{Upper(Student.LName)}} AS u FROM Student WHERE Sex = 'F' ORDER BY u, StuID",
        "SELECT upper(LName) AS u FROM Student WHERE Sex = 'F' ORDER BY u, StuID",
        order="exact",
        exact={"Upper": "SELECT DISTINCT LName FROM Student WHERE Sex = 'F'"},
    ),
    Pair(
        "select_scalar_correlated_subquery", EMP,
        "SELECT Name, (SELECT COUNT(*) FROM hiring h WHERE h.Employee_ID = employee.Employee_ID "
        "AND {{StartsWith('20', h.Start_from)}}) FROM employee",
        "SELECT Name, (SELECT COUNT(*) FROM hiring h WHERE h.Employee_ID = employee.Employee_ID "
        "AND substr(h.Start_from, 1, 2) = '20') FROM employee",
        within={"StartsWith": "SELECT Start_from FROM hiring"},
    ),
    # ---------------------------------------------------- ORDER BY / LIMIT
    Pair(
        "order_by_map", CS,
        "SELECT Name FROM singer ORDER BY {{Length(singer.Name)}} DESC, Name",
        "SELECT Name FROM singer ORDER BY length(Name) DESC, Name",
        order="exact",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "order_by_map_limit", WORLD,
        "SELECT Name FROM country ORDER BY {{Length(country.Name)}} DESC, Code LIMIT 5",
        "SELECT Name FROM country ORDER BY length(Name) DESC, Code LIMIT 5",
        order="exact",
        exact={"Length": "SELECT DISTINCT Name FROM country"},
    ),
    Pair(
        "limit_offset_plain_order", CS,
        "SELECT Name FROM singer WHERE {{Length(singer.Name)}} > 9 ORDER BY Singer_ID "
        "LIMIT 2 OFFSET 1",
        "SELECT Name FROM singer WHERE length(Name) > 9 ORDER BY Singer_ID LIMIT 2 OFFSET 1",
        order="exact",
        within={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "limit_without_order", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE LIMIT 2",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' LIMIT 2",
        order="sample",
        sample_of="SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J'",
        within={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "limit_early_stop_order_plain", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('B', country.Name)}} = TRUE "
        "ORDER BY Code LIMIT 3",
        "SELECT Code FROM country WHERE substr(Name, 1, 1) = 'B' ORDER BY Code LIMIT 3",
        order="exact",
        within={"StartsWith": "SELECT Name FROM country"},
        needs={"StartsWith": "SELECT Name FROM country WHERE Code <= 'BEN'"},
    ),
    Pair(
        "order_by_two_ingredients_cte_join", CAR,
        "WITH big AS (SELECT Id, Cylinders FROM cars_data WHERE Cylinders >= 8) "
        "SELECT cn.Make FROM big JOIN car_names cn ON cn.MakeId = big.Id "
        "WHERE {{StartsWith('ford', cn.Make)}} = TRUE ORDER BY {{Length(cn.Make)}}, cn.MakeId",
        "WITH big AS (SELECT Id, Cylinders FROM cars_data WHERE Cylinders >= 8) "
        "SELECT cn.Make FROM big JOIN car_names cn ON cn.MakeId = big.Id "
        "WHERE substr(cn.Make, 1, 4) = 'ford' ORDER BY length(cn.Make), cn.MakeId",
        order="exact",
        within={"StartsWith": "SELECT cn.Make FROM cars_data d JOIN car_names cn "
                              "ON cn.MakeId = d.Id WHERE d.Cylinders >= 8",
                "Length": "SELECT cn.Make FROM cars_data d JOIN car_names cn "
                          "ON cn.MakeId = d.Id WHERE d.Cylinders >= 8"},
        needs={"Length": "SELECT cn.Make FROM cars_data d JOIN car_names cn ON cn.MakeId = d.Id "
                         "WHERE d.Cylinders >= 8 AND substr(cn.Make, 1, 4) = 'ford'"},
    ),
    # ------------------------------------------------- GROUP BY / HAVING / aggregates
    Pair(
        "group_by_map_key", CS,
        "SELECT {{Length(singer.Country)}} AS n, COUNT(*) FROM singer "
        "GROUP BY {{Length(singer.Country)}}",
        "SELECT length(Country) AS n, COUNT(*) FROM singer GROUP BY length(Country)",
        within={"Length": "SELECT Country FROM singer"},
        needs={"Length": "SELECT Country FROM singer WHERE Country IS NOT NULL"},
    ),
    Pair(
        "group_by_alias_order_limit", FLY,
        "SELECT {{Upper(airports.City)}} AS c, COUNT(*) FROM airports GROUP BY c "
        "ORDER BY 2 DESC, 1 LIMIT 5",
        "SELECT upper(City) AS c, COUNT(*) FROM airports GROUP BY c ORDER BY 2 DESC, 1 LIMIT 5",
        order="exact",
        exact={"Upper": "SELECT DISTINCT City FROM airports WHERE City IS NOT NULL"},
    ),
    Pair(
        "group_by_plain_where_map", PETS,
        "SELECT Major, COUNT(*) FROM Student WHERE {{StartsWith('B', Student.city_code)}} = TRUE "
        "GROUP BY Major ORDER BY Major",
        "SELECT Major, COUNT(*) FROM Student WHERE substr(city_code, 1, 1) = 'B' "
        "GROUP BY Major ORDER BY Major",
        order="exact",
        exact={"StartsWith": "SELECT DISTINCT city_code FROM Student "
                             "WHERE city_code IS NOT NULL"},
    ),
    Pair(
        "having_map_on_group_key", CS,
        "SELECT Country, COUNT(*) FROM singer GROUP BY Country "
        "HAVING {{Length(singer.Country)}} > 6",
        "SELECT Country, COUNT(*) FROM singer GROUP BY Country HAVING length(Country) > 6",
        within={"Length": "SELECT Country FROM singer"},
        needs={"Length": "SELECT Country FROM singer WHERE Country IS NOT NULL"},
    ),
    Pair(
        "having_aggregate_over_map", EMP,
        "SELECT City, COUNT(*) FROM employee GROUP BY City "
        "HAVING SUM({{Length(employee.Name)}}) > 20",
        "SELECT City, COUNT(*) FROM employee GROUP BY City HAVING SUM(length(Name)) > 20",
        exact={"Length": "SELECT DISTINCT Name FROM employee WHERE Name IS NOT NULL"},
    ),
    Pair(
        "having_count_over_predicate", CS,
        "SELECT Country FROM singer GROUP BY Country "
        "HAVING SUM({{StartsWith('T', singer.Name)}}) >= 1",
        "SELECT Country FROM singer GROUP BY Country HAVING SUM(substr(Name, 1, 1) = 'T') >= 1",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "aggregates_over_map_outputs", CS,
        "SELECT SUM({{Length(singer.Name)}}), MAX({{Length(singer.Song_Name)}}), "
        "AVG({{Length(singer.Country)}}) FROM singer",
        "SELECT SUM(length(Name)), MAX(length(Song_Name)), AVG(length(Country)) FROM singer",
        within={"Length": "SELECT Name FROM singer UNION SELECT Song_Name FROM singer "
                          "UNION SELECT Country FROM singer"},
    ),
    Pair(
        "aggregate_group_avg_map", CS,
        "SELECT Country, AVG({{Length(singer.Name)}}) FROM singer GROUP BY Country",
        "SELECT Country, AVG(length(Name)) FROM singer GROUP BY Country",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "count_where_map", CS,
        "SELECT COUNT(*) FROM singer WHERE {{StartsWith('T', singer.Name)}} = TRUE",
        "SELECT COUNT(*) FROM singer WHERE substr(Name, 1, 1) = 'T'",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "count_distinct_map", FLY,
        "SELECT COUNT(DISTINCT {{Length(airports.AirportName)}}) FROM airports",
        "SELECT COUNT(DISTINCT length(AirportName)) FROM airports",
        exact={"Length": "SELECT DISTINCT AirportName FROM airports "
                         "WHERE AirportName IS NOT NULL"},
    ),
    Pair(
        "group_sum_predicate_big_join", WORLD,
        "SELECT co.Continent, SUM({{StartsWith('S', ci.Name)}}) FROM city ci "
        "JOIN country co ON ci.CountryCode = co.Code GROUP BY co.Continent",
        "SELECT co.Continent, SUM(substr(ci.Name, 1, 1) = 'S') FROM city ci "
        "JOIN country co ON ci.CountryCode = co.Code GROUP BY co.Continent",
        exact={"StartsWith": "SELECT DISTINCT ci.Name FROM city ci "
                             "JOIN country co ON ci.CountryCode = co.Code"},
    ),
    Pair(
        "group_having_where_map", CAR,
        "SELECT Year, COUNT(*) FROM cars_data WHERE {{Length(cars_data.Horsepower)}} = 3 "
        "GROUP BY Year HAVING COUNT(*) > 2 ORDER BY Year",
        "SELECT Year, COUNT(*) FROM cars_data WHERE length(Horsepower) = 3 "
        "GROUP BY Year HAVING COUNT(*) > 2 ORDER BY Year",
        order="exact",
        exact={"Length": "SELECT DISTINCT Horsepower FROM cars_data "
                         "WHERE Horsepower IS NOT NULL"},
    ),
    # ------------------------------------------ subqueries, CTEs, derived tables
    Pair(
        "in_subquery_with_join", CS,
        "SELECT concert_Name FROM concert WHERE concert_ID IN (SELECT sic.concert_ID "
        "FROM singer_in_concert sic JOIN singer s ON sic.Singer_ID = s.Singer_ID "
        "WHERE {{StartsWith('J', s.Name)}} = TRUE)",
        "SELECT concert_Name FROM concert WHERE concert_ID IN (SELECT sic.concert_ID "
        "FROM singer_in_concert sic JOIN singer s ON sic.Singer_ID = s.Singer_ID "
        "WHERE substr(s.Name, 1, 1) = 'J')",
        exact={"StartsWith": "SELECT DISTINCT s.Name FROM singer_in_concert sic "
                             "JOIN singer s ON sic.Singer_ID = s.Singer_ID"},
    ),
    Pair(
        "in_subquery_list_of_ids", CAR,
        "SELECT CountryName FROM countries WHERE Continent IN (SELECT ContId FROM continents "
        "WHERE {{StartsWith('a', continents.Continent)}} = TRUE)",
        "SELECT CountryName FROM countries WHERE Continent IN (SELECT ContId FROM continents "
        "WHERE substr(Continent, 1, 1) = 'a')",
        exact={"StartsWith": "SELECT DISTINCT Continent FROM continents"},
    ),
    Pair(
        "not_in_subquery_plain", PETS,
        "SELECT Fname FROM Student WHERE StuID NOT IN (SELECT StuID FROM Has_Pet) "
        "AND {{Length(Student.Fname)}} <= 4",
        "SELECT Fname FROM Student WHERE StuID NOT IN (SELECT StuID FROM Has_Pet) "
        "AND length(Fname) <= 4",
        exact={"Length": "SELECT DISTINCT Fname FROM Student "
                         "WHERE StuID NOT IN (SELECT StuID FROM Has_Pet)"},
    ),
    Pair(
        "map_in_literal_list", CAR,
        "SELECT Maker FROM car_makers WHERE {{Upper(car_makers.Maker)}} IN ('BMW', 'FORD', 'KIA')",
        "SELECT Maker FROM car_makers WHERE upper(Maker) IN ('BMW', 'FORD', 'KIA')",
        exact={"Upper": "SELECT DISTINCT Maker FROM car_makers"},
    ),
    Pair(
        "in_subquery_and_outer_map", FLY,
        "SELECT a.Airline FROM airlines a WHERE {{StartsWith('A', a.Airline)}} = TRUE "
        "AND a.uid IN (SELECT Airline FROM flights WHERE DestAirport = 'APG')",
        "SELECT a.Airline FROM airlines a WHERE substr(a.Airline, 1, 1) = 'A' "
        "AND a.uid IN (SELECT Airline FROM flights WHERE DestAirport = 'APG')",
        exact={"StartsWith": "SELECT DISTINCT Airline FROM airlines "
                             "WHERE uid IN (SELECT Airline FROM flights WHERE DestAirport = 'APG')"},
    ),
    Pair(
        "exists_correlated", CS,
        "SELECT st.Name FROM stadium st WHERE EXISTS (SELECT 1 FROM concert c "
        "WHERE c.Stadium_ID = st.Stadium_ID AND {{StartsWith('Week', c.concert_Name)}} = TRUE)",
        "SELECT st.Name FROM stadium st WHERE EXISTS (SELECT 1 FROM concert c "
        "WHERE c.Stadium_ID = st.Stadium_ID AND substr(c.concert_Name, 1, 4) = 'Week')",
        within={"StartsWith": "SELECT concert_Name FROM concert"},
        needs={"StartsWith": "SELECT c.concert_Name FROM concert c "
                             "JOIN stadium st ON c.Stadium_ID = st.Stadium_ID"},
    ),
    Pair(
        "correlated_outer_column_in_subquery", CS,
        "SELECT st.Name FROM stadium st WHERE (SELECT COUNT(*) FROM concert c "
        "WHERE c.Stadium_ID = st.Stadium_ID AND {{Length(st.Location)}} > 9) > 0",
        "SELECT st.Name FROM stadium st WHERE (SELECT COUNT(*) FROM concert c "
        "WHERE c.Stadium_ID = st.Stadium_ID AND length(st.Location) > 9) > 0",
        within={"Length": "SELECT Location FROM stadium"},
    ),
    Pair(
        "cte_filter_then_map", CS,
        "WITH old AS (SELECT * FROM singer WHERE Age > 30) "
        "SELECT Name FROM old WHERE {{StartsWith('J', old.Name)}} = TRUE",
        "WITH old AS (SELECT * FROM singer WHERE Age > 30) "
        "SELECT Name FROM old WHERE substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE Age > 30"},
    ),
    Pair(
        "cte_map_inside_filter_outside", CS,
        "WITH j AS (SELECT * FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE) "
        "SELECT Name FROM j WHERE Age > 30",
        "WITH j AS (SELECT * FROM singer WHERE substr(Name, 1, 1) = 'J') "
        "SELECT Name FROM j WHERE Age > 30",
        within={"StartsWith": ALL_SINGER_NAMES},
        needs={"StartsWith": "SELECT Name FROM singer WHERE Age > 30"},
    ),
    Pair(
        "cte_aggregate_then_map", EMP,
        "WITH c AS (SELECT City, COUNT(*) AS n FROM employee GROUP BY City) "
        "SELECT City, n FROM c WHERE {{StartsWith('B', c.City)}} = TRUE ORDER BY City",
        "WITH c AS (SELECT City, COUNT(*) AS n FROM employee GROUP BY City) "
        "SELECT City, n FROM c WHERE substr(City, 1, 1) = 'B' ORDER BY City",
        order="exact",
        exact={"StartsWith": "SELECT DISTINCT City FROM employee WHERE City IS NOT NULL"},
    ),
    Pair(
        "two_ctes_ingredients_in_both", WORLD,
        "WITH eu AS (SELECT Code, Name FROM country WHERE Continent = 'Europe' "
        "AND {{Length(country.Name)}} < 7), "
        "langs AS (SELECT CountryCode, Language FROM countrylanguage "
        "WHERE {{StartsWith('G', countrylanguage.Language)}} = TRUE) "
        "SELECT eu.Name, langs.Language FROM eu JOIN langs ON langs.CountryCode = eu.Code",
        "WITH eu AS (SELECT Code, Name FROM country WHERE Continent = 'Europe' "
        "AND length(Name) < 7), "
        "langs AS (SELECT CountryCode, Language FROM countrylanguage "
        "WHERE substr(Language, 1, 1) = 'G') "
        "SELECT eu.Name, langs.Language FROM eu JOIN langs ON langs.CountryCode = eu.Code",
        exact={"Length": "SELECT DISTINCT Name FROM country WHERE Continent = 'Europe'"},
        within={"StartsWith": "SELECT Language FROM countrylanguage"},
    ),
    Pair(
        "derived_table_filter_then_map", CS,
        "SELECT d.Name FROM (SELECT Name, Age FROM singer WHERE Country = 'France') AS d "
        "WHERE {{Length(d.Name)}} > 10",
        "SELECT d.Name FROM (SELECT Name, Age FROM singer WHERE Country = 'France') AS d "
        "WHERE length(d.Name) > 10",
        exact={"Length": "SELECT DISTINCT Name FROM singer WHERE Country = 'France'"},
    ),
    Pair(
        "derived_table_group_join_map", CAR,
        "SELECT t.Maker, t.n FROM (SELECT Maker, COUNT(*) AS n FROM model_list GROUP BY Maker) t "
        "JOIN car_makers cm ON cm.Id = t.Maker WHERE {{StartsWith('t', cm.Maker)}} = TRUE "
        "ORDER BY t.Maker",
        "SELECT t.Maker, t.n FROM (SELECT Maker, COUNT(*) AS n FROM model_list GROUP BY Maker) t "
        "JOIN car_makers cm ON cm.Id = t.Maker WHERE substr(cm.Maker, 1, 1) = 't' "
        "ORDER BY t.Maker",
        order="exact",
        exact={"StartsWith": "SELECT DISTINCT cm.Maker FROM car_makers cm "
                             "WHERE cm.Id IN (SELECT Maker FROM model_list)"},
    ),
    Pair(
        "derived_table_with_ingredient_inside", FLY,
        "SELECT x.c, COUNT(*) FROM (SELECT City AS c FROM airports "
        "WHERE {{StartsWith('A', airports.City)}} = TRUE) x GROUP BY x.c ORDER BY x.c",
        "SELECT x.c, COUNT(*) FROM (SELECT City AS c FROM airports "
        "WHERE substr(City, 1, 1) = 'A') x GROUP BY x.c ORDER BY x.c",
        order="exact",
        exact={"StartsWith": "SELECT DISTINCT City FROM airports WHERE City IS NOT NULL"},
    ),
    Pair(
        "union_with_ingredients", WORLD,
        "SELECT Name FROM country WHERE {{StartsWith('Z', country.Name)}} = TRUE "
        "UNION SELECT Name FROM city WHERE {{StartsWith('Zu', city.Name)}} = TRUE",
        "SELECT Name FROM country WHERE substr(Name, 1, 1) = 'Z' "
        "UNION SELECT Name FROM city WHERE substr(Name, 1, 2) = 'Zu'",
        exact={"StartsWith:Z": "SELECT DISTINCT Name FROM country",
               "StartsWith:Zu": "SELECT DISTINCT Name FROM city"},
    ),
    Pair(
        "except_with_ingredient", EMP,
        "SELECT City FROM employee EXCEPT SELECT City FROM employee "
        "WHERE {{Length(employee.Name)}} > 12",
        "SELECT City FROM employee EXCEPT SELECT City FROM employee WHERE length(Name) > 12",
        exact={"Length": "SELECT DISTINCT Name FROM employee WHERE Name IS NOT NULL"},
    ),
    # ------------------------------------------------------------- joins
    Pair(
        "multi_join_two_maps", CS,
        "SELECT s.Name, c.concert_Name, st.Name FROM singer s "
        "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
        "JOIN concert c ON c.concert_ID = sic.concert_ID "
        "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
        "WHERE {{StartsWith('2015', c.Year)}} = TRUE AND {{Length(st.Name)}} > 12",
        "SELECT s.Name, c.concert_Name, st.Name FROM singer s "
        "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
        "JOIN concert c ON c.concert_ID = sic.concert_ID "
        "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
        "WHERE substr(c.Year, 1, 4) = '2015' AND length(st.Name) > 12",
        within={
            "StartsWith": "SELECT c.Year FROM singer_in_concert sic "
                          "JOIN concert c ON c.concert_ID = sic.concert_ID "
                          "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID",
            "Length": "SELECT st.Name FROM singer_in_concert sic "
                      "JOIN concert c ON c.concert_ID = sic.concert_ID "
                      "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID",
        },
        needs={
            "StartsWith": "SELECT c.Year FROM singer_in_concert sic "
                          "JOIN concert c ON c.concert_ID = sic.concert_ID "
                          "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
                          "WHERE length(st.Name) > 12",
            "Length": "SELECT st.Name FROM singer_in_concert sic "
                      "JOIN concert c ON c.concert_ID = sic.concert_ID "
                      "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
                      "WHERE substr(c.Year, 1, 4) = '2015'",
        },
        cascade=(
            ("StartsWith", "SELECT c.Year FROM singer s "
                           "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
                           "JOIN concert c ON c.concert_ID = sic.concert_ID "
                           "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID",
             "SELECT c.Year FROM singer s "
             "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
             "JOIN concert c ON c.concert_ID = sic.concert_ID "
             "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID WHERE length(st.Name) > 12"),
            ("Length", "SELECT st.Name FROM singer s "
                       "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
                       "JOIN concert c ON c.concert_ID = sic.concert_ID "
                       "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID",
             "SELECT st.Name FROM singer s "
             "JOIN singer_in_concert sic ON s.Singer_ID = sic.Singer_ID "
             "JOIN concert c ON c.concert_ID = sic.concert_ID "
             "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
             "WHERE substr(c.Year, 1, 4) = '2015'"),
        ),
    ),
    Pair(
        "join_three_tables_aliases", PETS,
        "SELECT s.Fname, p.PetType FROM Student s JOIN Has_Pet hp ON s.StuID = hp.StuID "
        "JOIN Pets p ON p.PetID = hp.PetID WHERE {{StartsWith('d', p.PetType)}} = TRUE",
        "SELECT s.Fname, p.PetType FROM Student s JOIN Has_Pet hp ON s.StuID = hp.StuID "
        "JOIN Pets p ON p.PetID = hp.PetID WHERE substr(p.PetType, 1, 1) = 'd'",
        exact={"StartsWith": "SELECT DISTINCT p.PetType FROM Student s "
                             "JOIN Has_Pet hp ON s.StuID = hp.StuID "
                             "JOIN Pets p ON p.PetID = hp.PetID"},
    ),
    Pair(
        "join_filter_other_table", WORLD,
        "SELECT ci.Name FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE co.Name = 'Netherlands' AND {{StartsWith('A', ci.Name)}} = TRUE",
        "SELECT ci.Name FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE co.Name = 'Netherlands' AND substr(ci.Name, 1, 1) = 'A'",
        exact={"StartsWith": "SELECT DISTINCT ci.Name FROM city ci "
                             "JOIN country co ON ci.CountryCode = co.Code "
                             "WHERE co.Name = 'Netherlands'"},
    ),
    Pair(
        "join_employee_shop_full_time", EMP,
        "SELECT e.Name, s.Name FROM employee e JOIN hiring h ON e.Employee_ID = h.Employee_ID "
        "JOIN shop s ON s.Shop_ID = h.Shop_ID WHERE h.Is_full_time = 'T' "
        "AND {{StartsWith('FC', s.Name)}} = TRUE",
        "SELECT e.Name, s.Name FROM employee e JOIN hiring h ON e.Employee_ID = h.Employee_ID "
        "JOIN shop s ON s.Shop_ID = h.Shop_ID WHERE h.Is_full_time = 'T' "
        "AND substr(s.Name, 1, 2) = 'FC'",
        exact={"StartsWith": "SELECT DISTINCT s.Name FROM employee e "
                             "JOIN hiring h ON e.Employee_ID = h.Employee_ID "
                             "JOIN shop s ON s.Shop_ID = h.Shop_ID WHERE h.Is_full_time = 'T'"},
    ),
    Pair(
        "join_real_values", EMP,
        "SELECT e.Name, ev.Bonus FROM employee e JOIN evaluation ev "
        "ON e.Employee_ID = ev.Employee_ID WHERE {{StartsWith('3', ev.Bonus)}} = TRUE",
        "SELECT e.Name, ev.Bonus FROM employee e JOIN evaluation ev "
        "ON e.Employee_ID = ev.Employee_ID WHERE substr(CAST(ev.Bonus AS TEXT), 1, 1) = '3'",
        exact={"StartsWith": "SELECT DISTINCT ev.Bonus FROM employee e JOIN evaluation ev "
                             "ON e.Employee_ID = ev.Employee_ID"},
    ),
    Pair(
        "left_join_map_on_nullable_side", EMP,
        "SELECT e.Name, h.Start_from FROM employee e LEFT JOIN hiring h "
        "ON e.Employee_ID = h.Employee_ID WHERE {{Length(e.Name)}} > 9",
        "SELECT e.Name, h.Start_from FROM employee e LEFT JOIN hiring h "
        "ON e.Employee_ID = h.Employee_ID WHERE length(e.Name) > 9",
        exact={"Length": "SELECT DISTINCT Name FROM employee"},
    ),
    # ------------------------------------------------------ join ingredient
    Pair(
        "join_ingredient_on_derived_upper", EMP,
        "SELECT e.Name, u.uname FROM (SELECT upper(Name) AS uname FROM employee) u "
        "JOIN employee e ON {{LowerJoin(u.uname, e.Name)}}",
        "SELECT e.Name, u.uname FROM (SELECT upper(Name) AS uname FROM employee) u "
        "JOIN employee e ON lower(trim(u.uname)) = lower(trim(e.Name))",
        within={"LowerJoin": "SELECT upper(Name) FROM employee",
                "LowerJoin.right": "SELECT Name FROM employee"},
        needs={"LowerJoin": "SELECT upper(Name) FROM employee",
               "LowerJoin.right": "SELECT Name FROM employee"},
    ),
    Pair(
        "join_ingredient_self_join_case", CAR,
        "SELECT a.Maker, b.FullName FROM car_makers a JOIN car_makers b "
        "ON {{LowerJoin(a.Maker, b.FullName)}}",
        "SELECT a.Maker, b.FullName FROM car_makers a JOIN car_makers b "
        "ON lower(trim(a.Maker)) = lower(trim(b.FullName))",
        within={"LowerJoin": "SELECT Maker FROM car_makers",
                "LowerJoin.right": "SELECT FullName FROM car_makers"},
    ),
    Pair(
        "join_ingredient_paper_form", CAR,
        "SELECT model_list.Model, car_makers.FullName FROM model_list "
        "JOIN {{LowerJoin(left_on='model_list::Model', right_on='car_makers::Maker')}}",
        "SELECT model_list.Model, car_makers.FullName FROM model_list "
        "JOIN car_makers ON lower(trim(model_list.Model)) = lower(trim(car_makers.Maker))",
        within={"LowerJoin": "SELECT Model FROM model_list",
                "LowerJoin.right": "SELECT Maker FROM car_makers"},
    ),
    Pair(
        "join_ingredient_paper_form_where_order", FLY,
        "SELECT flights.FlightNo, airports.City FROM flights "
        "JOIN {{LowerJoin(left_on='flights::DestAirport', right_on='airports::AirportCode')}} "
        "WHERE flights.Airline = 2 ORDER BY flights.FlightNo",
        "SELECT flights.FlightNo, airports.City FROM flights "
        "JOIN airports ON lower(trim(flights.DestAirport)) = lower(trim(airports.AirportCode)) "
        "WHERE flights.Airline = 2 ORDER BY flights.FlightNo",
        order="exact",
        within={"LowerJoin": "SELECT DestAirport FROM flights",
                "LowerJoin.right": "SELECT AirportCode FROM airports"},
        needs={"LowerJoin": "SELECT DestAirport FROM flights WHERE Airline = 2"},
    ),
    Pair(
        "join_ingredient_where_plain_and_map", FLY,
        "SELECT f.FlightNo, src.City FROM flights f JOIN airports src "
        "ON {{LowerJoin(f.SourceAirport, src.AirportCode)}} "
        "WHERE f.Airline = 5 AND {{StartsWith('A', src.City)}} = TRUE",
        "SELECT f.FlightNo, src.City FROM flights f JOIN airports src "
        "ON lower(trim(f.SourceAirport)) = lower(trim(src.AirportCode)) "
        "WHERE f.Airline = 5 AND substr(src.City, 1, 1) = 'A'",
        within={"LowerJoin": "SELECT SourceAirport FROM flights",
                "LowerJoin.right": "SELECT AirportCode FROM airports",
                "StartsWith": "SELECT City FROM airports"},
        needs={"LowerJoin": "SELECT SourceAirport FROM flights f JOIN airports a "
                            "ON f.SourceAirport = a.AirportCode "
                            "WHERE f.Airline = 5 AND substr(a.City, 1, 1) = 'A'",
               "StartsWith": "SELECT a.City FROM flights f JOIN airports a "
                             "ON f.SourceAirport = a.AirportCode WHERE f.Airline = 5"},
    ),
    Pair(
        "join_ingredient_big_left", WORLD,
        "SELECT ci.Name, co.Name FROM city ci JOIN country co "
        "ON {{LowerJoin(ci.CountryCode, co.Code)}} WHERE co.Region = 'Polynesia'",
        "SELECT ci.Name, co.Name FROM city ci JOIN country co "
        "ON lower(trim(ci.CountryCode)) = lower(trim(co.Code)) WHERE co.Region = 'Polynesia'",
        within={"LowerJoin": "SELECT CountryCode FROM city",
                "LowerJoin.right": "SELECT Code FROM country"},
        needs={"LowerJoin": "SELECT ci.CountryCode FROM city ci JOIN country co "
                            "ON ci.CountryCode = co.Code WHERE co.Region = 'Polynesia'",
               "LowerJoin.right": "SELECT Code FROM country WHERE Region = 'Polynesia' "
                                  "AND Code IN (SELECT CountryCode FROM city)"},
    ),
    Pair(
        "join_ingredient_then_plain_join", CAR,
        "SELECT ml.Model, co.CountryName FROM model_list ml JOIN car_makers cm "
        "ON {{LowerJoin(ml.Model, cm.Maker)}} JOIN countries co ON co.CountryId = cm.Country "
        "ORDER BY ml.Model",
        "SELECT ml.Model, co.CountryName FROM model_list ml JOIN car_makers cm "
        "ON lower(trim(ml.Model)) = lower(trim(cm.Maker)) "
        "JOIN countries co ON co.CountryId = cm.Country ORDER BY ml.Model",
        order="exact",
        within={"LowerJoin": "SELECT Model FROM model_list",
                "LowerJoin.right": "SELECT Maker FROM car_makers"},
    ),
    Pair(
        "join_ingredient_in_cte", EMP,
        "WITH m AS (SELECT e.Employee_ID, e.Name FROM (SELECT upper(Name) AS un FROM employee) u "
        "JOIN employee e ON {{LowerJoin(u.un, e.Name)}}) "
        "SELECT m.Name, h.Shop_ID FROM m JOIN hiring h ON h.Employee_ID = m.Employee_ID",
        "WITH m AS (SELECT e.Employee_ID, e.Name FROM (SELECT upper(Name) AS un FROM employee) u "
        "JOIN employee e ON lower(trim(u.un)) = lower(trim(e.Name))) "
        "SELECT m.Name, h.Shop_ID FROM m JOIN hiring h ON h.Employee_ID = m.Employee_ID",
        within={"LowerJoin": "SELECT upper(Name) FROM employee",
                "LowerJoin.right": "SELECT Name FROM employee"},
    ),
    # ------------------------------------------------------------------ QA
    Pair(
        "qa_context_subquery", CS,
        "SELECT Name FROM singer WHERE Age > {{CountRows('How many concerts in 2014?', "
        "(SELECT * FROM concert WHERE Year = '2014'))}} * 10",
        "SELECT Name FROM singer WHERE Age > "
        "(SELECT COUNT(*) FROM (SELECT * FROM concert WHERE Year = '2014')) * 10",
    ),
    Pair(
        "qa_options_int", CS,
        "SELECT Name FROM singer WHERE Age = {{MaxOption('Oldest age?', options='singer::Age')}}",
        "SELECT Name FROM singer WHERE Age = (SELECT MAX(Age) FROM singer)",
    ),
    Pair(
        "qa_options_text", CS,
        "SELECT Name FROM singer WHERE Country = "
        "{{FirstOption('First country?', options='singer::Country')}}",
        "SELECT Name FROM singer WHERE Country = (SELECT MIN(Country) FROM singer)",
    ),
    Pair(
        "qa_options_nullable_column", WORLD,
        "SELECT Name FROM country WHERE IndepYear = "
        "{{MaxOption('Latest independence?', options='country::IndepYear')}}",
        "SELECT Name FROM country WHERE IndepYear = (SELECT MAX(IndepYear) FROM country)",
    ),
    Pair(
        "qa_in_select_with_join_context", EMP,
        "SELECT {{CountRows('How many part-timers?', (SELECT e.Name FROM employee e "
        "JOIN hiring h ON e.Employee_ID = h.Employee_ID WHERE h.Is_full_time = 'F'))}} AS n",
        "SELECT (SELECT COUNT(*) FROM (SELECT e.Name FROM employee e "
        "JOIN hiring h ON e.Employee_ID = h.Employee_ID WHERE h.Is_full_time = 'F')) AS n",
    ),
    Pair(
        "qa_in_having", EMP,
        "SELECT City FROM employee GROUP BY City HAVING COUNT(*) = "
        "{{CountRows('How many in Bath?', (SELECT * FROM employee WHERE City = 'Bath'))}}",
        "SELECT City FROM employee GROUP BY City HAVING COUNT(*) = "
        "(SELECT COUNT(*) FROM (SELECT * FROM employee WHERE City = 'Bath'))",
    ),
    Pair(
        "qa_in_case_and_order", CS,
        "SELECT Name, CASE WHEN Age >= {{MaxOption('max?', options='singer::Age')}} - 10 "
        "THEN 'senior' ELSE 'junior' END AS grp FROM singer ORDER BY grp, Name",
        "SELECT Name, CASE WHEN Age >= (SELECT MAX(Age) FROM singer) - 10 "
        "THEN 'senior' ELSE 'junior' END AS grp FROM singer ORDER BY grp, Name",
        order="exact",
    ),
    Pair(
        "nested_map_inside_qa_context", CS,
        "SELECT {{CountRows('How many J singers?', (SELECT * FROM singer "
        "WHERE {{StartsWith('J', singer.Name)}} = TRUE))}} AS n",
        "SELECT (SELECT COUNT(*) FROM (SELECT * FROM singer WHERE substr(Name, 1, 1) = 'J')) AS n",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "nested_qa_compared_with_map", CAR,
        "SELECT cm.Maker FROM car_makers cm WHERE {{Length(cm.Maker)}} > "
        "{{CountRows('q', (SELECT * FROM continents "
        "WHERE {{StartsWith('a', continents.Continent)}} = TRUE))}}",
        "SELECT cm.Maker FROM car_makers cm WHERE length(cm.Maker) > "
        "(SELECT COUNT(*) FROM (SELECT * FROM continents WHERE substr(Continent, 1, 1) = 'a'))",
        exact={"StartsWith": "SELECT DISTINCT Continent FROM continents",
               "Length": "SELECT DISTINCT Maker FROM car_makers"},
    ),
    Pair(
        "nested_two_levels", CS,
        "SELECT Name FROM singer WHERE Age > {{CountRows('q', (SELECT * FROM concert WHERE "
        "Stadium_ID IN (SELECT Stadium_ID FROM stadium WHERE {{Length(stadium.Name)}} > 12)))}} "
        "* 10",
        "SELECT Name FROM singer WHERE Age > (SELECT COUNT(*) FROM (SELECT * FROM concert WHERE "
        "Stadium_ID IN (SELECT Stadium_ID FROM stadium WHERE length(Name) > 12))) * 10",
        exact={"Length": "SELECT DISTINCT Name FROM stadium WHERE Name IS NOT NULL"},
    ),
    # -------------------------------------------------------- parameters
    Pair(
        "params_around_map", CS,
        "SELECT Name FROM singer WHERE Age > ? AND Country = ? AND {{Length(singer.Name)}} > ?",
        "SELECT Name FROM singer WHERE Age > ? AND Country = ? AND length(Name) > ?",
        params=(30, "France", 9),
        exact={"Length": "SELECT DISTINCT Name FROM singer WHERE Age > 30 AND Country = 'France'"},
    ),
    Pair(
        "params_with_order_limit", WORLD,
        "SELECT Name FROM country WHERE Population > ? AND {{Length(country.Name)}} < ? "
        "ORDER BY Population DESC LIMIT ?",
        "SELECT Name FROM country WHERE Population > ? AND length(Name) < ? "
        "ORDER BY Population DESC LIMIT ?",
        params=(100000000, 6, 3),
        order="exact",
        within={"Length": "SELECT Name FROM country WHERE Population > 100000000"},
    ),
    Pair(
        "params_in_subquery", FLY,
        "SELECT Airline FROM airlines WHERE uid IN (SELECT Airline FROM flights "
        "WHERE SourceAirport = ?) AND {{StartsWith('U', airlines.Abbreviation)}} = FALSE "
        "AND uid > ?",
        "SELECT Airline FROM airlines WHERE uid IN (SELECT Airline FROM flights "
        "WHERE SourceAirport = ?) AND (substr(Abbreviation, 1, 1) = 'U') = FALSE AND uid > ?",
        params=("APG", 0),
        exact={"StartsWith": "SELECT DISTINCT Abbreviation FROM airlines WHERE uid IN "
                             "(SELECT Airline FROM flights WHERE SourceAirport = 'APG') AND uid > 0"},
    ),
    # ------------------------------------------ brace style, names, operators
    Pair(
        "angle_brace_style", CS,
        "SELECT Name FROM singer WHERE <<StartsWith('J', singer.Name)>> = TRUE",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "angle_braces_next_to_shift_operators", CS,
        "SELECT Name, Age << 1 FROM singer WHERE <<Length(singer.Name)>> >> 1 = 5",
        "SELECT Name, Age << 1 FROM singer WHERE length(Name) >> 1 = 5",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "mixed_brace_styles", FLY,
        "SELECT AirportCode FROM airports WHERE {{StartsWith('Ab', airports.City)}} = TRUE "
        "AND <<Length(airports.AirportName)>> > 10",
        "SELECT AirportCode FROM airports WHERE substr(City, 1, 2) = 'Ab' "
        "AND length(AirportName) > 10",
        within={"StartsWith": "SELECT City FROM airports",
                "Length": "SELECT AirportName FROM airports"},
        needs={"StartsWith": "SELECT City FROM airports WHERE length(AirportName) > 10",
               "Length": "SELECT AirportName FROM airports WHERE substr(City, 1, 2) = 'Ab'"},
        cascade=(
            ("StartsWith", "SELECT City FROM airports",
             "SELECT City FROM airports WHERE length(AirportName) > 10"),
            ("Length", "SELECT AirportName FROM airports",
             "SELECT AirportName FROM airports WHERE substr(City, 1, 2) = 'Ab'"),
        ),
    ),
    Pair(
        "case_insensitive_names", CS,
        "SELECT Name FROM singer WHERE {{startswith('J', singer.Name)}} = TRUE "
        "AND {{LENGTH(singer.Name)}} = length(singer.Name)",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' AND length(Name) = length(Name)",
        within={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "ingredient_name_lower_qa", CS,
        "SELECT Name FROM singer WHERE Age = {{maxoption('q', options='singer::Age')}}",
        "SELECT Name FROM singer WHERE Age = (SELECT MAX(Age) FROM singer)",
    ),
    Pair(
        "paper_refs_everywhere", EMP,
        "SELECT Name FROM employee WHERE {{StartsWith('Bri', 'employee::City')}} = TRUE "
        "AND {{Length('employee::Name')}} > 11",
        "SELECT Name FROM employee WHERE substr(City, 1, 3) = 'Bri' AND length(Name) > 11",
        within={"StartsWith": "SELECT City FROM employee", "Length": "SELECT Name FROM employee"},
        cascade=(
            ("StartsWith", "SELECT City FROM employee",
             "SELECT City FROM employee WHERE length(Name) > 11"),
            ("Length", "SELECT Name FROM employee",
             "SELECT Name FROM employee WHERE substr(City, 1, 3) = 'Bri'"),
        ),
    ),
    # ------------------------------------------------ more edge constructs
    Pair(
        "left_join_on_map_keeps_left_rows", CS,
        "SELECT st.Name, c.concert_Name FROM stadium st LEFT JOIN concert c "
        "ON c.Stadium_ID = st.Stadium_ID AND {{StartsWith('Week', c.concert_Name)}} = TRUE",
        "SELECT st.Name, c.concert_Name FROM stadium st LEFT JOIN concert c "
        "ON c.Stadium_ID = st.Stadium_ID AND substr(c.concert_Name, 1, 4) = 'Week'",
        within={"StartsWith": "SELECT concert_Name FROM concert"},
    ),
    Pair(
        "inner_join_on_map_and_key", EMP,
        "SELECT e.Name, h.Shop_ID FROM employee e JOIN hiring h "
        "ON h.Employee_ID = e.Employee_ID AND {{StartsWith('20', h.Start_from)}} = TRUE "
        "AND {{Length(e.Name)}} < 12",
        "SELECT e.Name, h.Shop_ID FROM employee e JOIN hiring h "
        "ON h.Employee_ID = e.Employee_ID AND substr(h.Start_from, 1, 2) = '20' "
        "AND length(e.Name) < 12",
        within={"StartsWith": "SELECT Start_from FROM hiring",
                "Length": "SELECT Name FROM employee"},
    ),
    Pair(
        "map_output_is_null", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('E', country.HeadOfState)}} IS NULL",
        "SELECT Code FROM country WHERE substr(HeadOfState, 1, 1) = 'E' IS NULL",
        within={"StartsWith": "SELECT HeadOfState FROM country"},
    ),
    Pair(
        "coalesce_over_map", WORLD,
        "SELECT Code, COALESCE({{Length(country.HeadOfState)}}, -1) FROM country "
        "WHERE Region = 'Antarctica' OR Continent = 'Oceania'",
        "SELECT Code, COALESCE(length(HeadOfState), -1) FROM country "
        "WHERE Region = 'Antarctica' OR Continent = 'Oceania'",
        exact={"Length": "SELECT DISTINCT HeadOfState FROM country WHERE "
                         "(Region = 'Antarctica' OR Continent = 'Oceania') "
                         "AND HeadOfState IS NOT NULL"},
    ),
    Pair(
        "between_with_map", FLY,
        "SELECT AirportCode FROM airports WHERE {{Length(airports.AirportName)}} BETWEEN 5 AND 7",
        "SELECT AirportCode FROM airports WHERE length(AirportName) BETWEEN 5 AND 7",
        exact={"Length": "SELECT DISTINCT AirportName FROM airports "
                         "WHERE AirportName IS NOT NULL"},
    ),
    Pair(
        "window_function_over_map", CS,
        "SELECT Name, ROW_NUMBER() OVER (ORDER BY {{Length(singer.Name)}} DESC, Name) AS rk "
        "FROM singer ORDER BY rk",
        "SELECT Name, ROW_NUMBER() OVER (ORDER BY length(Name) DESC, Name) AS rk "
        "FROM singer ORDER BY rk",
        order="exact",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "union_all_same_ingredient_two_tables", EMP,
        "SELECT Name FROM employee WHERE {{StartsWith('M', employee.Name)}} = TRUE "
        "UNION ALL SELECT Name FROM shop WHERE {{StartsWith('M', shop.Manager_name)}} = TRUE",
        "SELECT Name FROM employee WHERE substr(Name, 1, 1) = 'M' "
        "UNION ALL SELECT Name FROM shop WHERE substr(Manager_name, 1, 1) = 'M'",
        exact={"StartsWith": "SELECT Name FROM employee UNION SELECT Manager_name FROM shop"},
    ),
    Pair(
        "braces_inside_string_literal_are_text", CS,
        "SELECT Name, '{{StartsWith(''J'', x)}} <<Length(y)>>' AS lit FROM singer "
        "WHERE {{StartsWith('J', singer.Name)}} = TRUE",
        "SELECT Name, '{{StartsWith(''J'', x)}} <<Length(y)>>' AS lit FROM singer "
        "WHERE substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "map_in_uncorrelated_scalar_subquery", CAR,
        "SELECT Maker, (SELECT COUNT(*) FROM continents "
        "WHERE {{StartsWith('a', continents.Continent)}} = TRUE) AS n FROM car_makers "
        "WHERE Id < 4",
        "SELECT Maker, (SELECT COUNT(*) FROM continents "
        "WHERE substr(Continent, 1, 1) = 'a') AS n FROM car_makers WHERE Id < 4",
        exact={"StartsWith": "SELECT DISTINCT Continent FROM continents"},
    ),
    Pair(
        "qa_in_in_list", CS,
        "SELECT Name FROM singer WHERE Country IN ("
        "{{FirstOption('q', options='singer::Country')}}, "
        "{{MaxOption('q', options='singer::Country')}})",
        "SELECT Name FROM singer WHERE Country IN ("
        "(SELECT MIN(Country) FROM singer), (SELECT MAX(Country) FROM singer))",
    ),
    Pair(
        "qa_options_from_other_table", EMP,
        "SELECT Name FROM employee WHERE City = "
        "{{FirstOption('Which?', (SELECT * FROM shop), options='employee::City')}}",
        "SELECT Name FROM employee WHERE City = (SELECT MIN(City) FROM employee)",
    ),
    Pair(
        "map_with_like_and_glob_plain", WORLD,
        "SELECT Name FROM city WHERE Name LIKE 'San %' AND CountryCode GLOB '[A-C]*' "
        "AND {{Length(city.District)}} > 8",
        "SELECT Name FROM city WHERE Name LIKE 'San %' AND CountryCode GLOB '[A-C]*' "
        "AND length(District) > 8",
        exact={"Length": "SELECT DISTINCT District FROM city "
                         "WHERE Name LIKE 'San %' AND CountryCode GLOB '[A-C]*'"},
    ),
    Pair(
        "multiline_query_with_comment", CS,
        "SELECT Name -- the singer\n"
        "FROM singer\n"
        "WHERE {{StartsWith('R',\n  singer.Name)}} = TRUE\n"
        "   OR Age = 25",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'R' OR Age = 25",
        within={"StartsWith": ALL_SINGER_NAMES},
        needs={"StartsWith": "SELECT Name FROM singer WHERE NOT Age = 25"},
    ),
    # ------------------------------------- scopes sharing an ingredient, escapes
    Pair(
        "same_call_two_scopes_different_filters", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE AND Singer_ID IN "
        "(SELECT Singer_ID FROM singer WHERE Age > 40 AND {{StartsWith('J', singer.Name)}} = TRUE)",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' AND Singer_ID IN "
        "(SELECT Singer_ID FROM singer WHERE Age > 40 AND substr(Name, 1, 1) = 'J')",
        within={"StartsWith": ALL_SINGER_NAMES},
        needs={"StartsWith": "SELECT Name FROM singer WHERE Age > 40"},
    ),
    Pair(
        "ingredient_order_limit_inside_in_subquery", CS,
        "SELECT Name FROM singer WHERE Singer_ID IN (SELECT Singer_ID FROM singer "
        "ORDER BY {{Length(singer.Name)}} DESC, Singer_ID LIMIT 2)",
        "SELECT Name FROM singer WHERE Singer_ID IN (SELECT Singer_ID FROM singer "
        "ORDER BY length(Name) DESC, Singer_ID LIMIT 2)",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "limited_derived_table_then_outer_map", CS,
        "SELECT t.Name FROM (SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
        "ORDER BY Singer_ID LIMIT 2) t WHERE {{Length(t.Name)}} > 10",
        "SELECT t.Name FROM (SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' "
        "ORDER BY Singer_ID LIMIT 2) t WHERE length(t.Name) > 10",
        exact={"Length": "SELECT Name FROM (SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' "
                         "ORDER BY Singer_ID LIMIT 2)"},
        within={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "limit_offset_early_stop_plain_order", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('S', country.Name)}} = TRUE "
        "AND Population > 1000000 ORDER BY Code LIMIT 3 OFFSET 2",
        "SELECT Code FROM country WHERE substr(Name, 1, 1) = 'S' "
        "AND Population > 1000000 ORDER BY Code LIMIT 3 OFFSET 2",
        order="exact",
        within={"StartsWith": "SELECT Name FROM country WHERE Population > 1000000"},
    ),
    Pair(
        "limit_cascade_two_ingredients", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('M', country.Name)}} = TRUE "
        "AND {{Length(country.Region)}} > 12 ORDER BY Code LIMIT 4",
        "SELECT Code FROM country WHERE substr(Name, 1, 1) = 'M' "
        "AND length(Region) > 12 ORDER BY Code LIMIT 4",
        order="exact",
        within={"StartsWith": "SELECT Name FROM country",
                "Length": "SELECT Region FROM country"},
    ),
    Pair(
        "map_arithmetic_against_column", CS,
        "SELECT Name FROM singer WHERE {{Length(singer.Name)}} * 4 > Age",
        "SELECT Name FROM singer WHERE length(Name) * 4 > Age",
        exact={"Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "group_by_map_with_null_inputs", WORLD,
        "SELECT {{Length(country.HeadOfState)}} AS n, COUNT(*) FROM country "
        "WHERE Continent = 'Antarctica' OR Region = 'Polynesia' GROUP BY n ORDER BY n",
        "SELECT length(HeadOfState) AS n, COUNT(*) FROM country "
        "WHERE Continent = 'Antarctica' OR Region = 'Polynesia' GROUP BY n ORDER BY n",
        order="exact",
        exact={"Length": "SELECT DISTINCT HeadOfState FROM country WHERE "
                         "(Continent = 'Antarctica' OR Region = 'Polynesia') "
                         "AND HeadOfState IS NOT NULL"},
    ),
    Pair(
        "not_in_subquery_with_ingredient", CS,
        "SELECT Name FROM singer WHERE Singer_ID NOT IN (SELECT sic.Singer_ID "
        "FROM singer_in_concert sic JOIN concert c ON c.concert_ID = sic.concert_ID "
        "WHERE {{StartsWith('Week', c.concert_Name)}} = TRUE)",
        "SELECT Name FROM singer WHERE Singer_ID NOT IN (SELECT sic.Singer_ID "
        "FROM singer_in_concert sic JOIN concert c ON c.concert_ID = sic.concert_ID "
        "WHERE substr(c.concert_Name, 1, 4) = 'Week')",
        exact={"StartsWith": "SELECT DISTINCT c.concert_Name FROM singer_in_concert sic "
                             "JOIN concert c ON c.concert_ID = sic.concert_ID"},
    ),
    Pair(
        "not_exists_with_ingredient", EMP,
        "SELECT s.Name FROM shop s WHERE NOT EXISTS (SELECT 1 FROM hiring h "
        "WHERE h.Shop_ID = s.Shop_ID AND {{StartsWith('T', h.Is_full_time)}} = TRUE)",
        "SELECT s.Name FROM shop s WHERE NOT EXISTS (SELECT 1 FROM hiring h "
        "WHERE h.Shop_ID = s.Shop_ID AND substr(h.Is_full_time, 1, 1) = 'T')",
        within={"StartsWith": "SELECT Is_full_time FROM hiring"},
    ),
    Pair(
        "not_over_and_with_nulls", WORLD,
        "SELECT Code FROM country WHERE Region = 'Caribbean' AND NOT "
        "({{StartsWith('E', country.HeadOfState)}} = TRUE AND {{Length(country.Name)}} > 5)",
        "SELECT Code FROM country WHERE Region = 'Caribbean' AND NOT "
        "(substr(HeadOfState, 1, 1) = 'E' AND length(Name) > 5)",
        within={"StartsWith": "SELECT HeadOfState FROM country WHERE Region = 'Caribbean'",
                "Length": "SELECT Name FROM country WHERE Region = 'Caribbean'"},
    ),
    Pair(
        "params_across_cte_and_outer", CS,
        "WITH t AS (SELECT * FROM singer WHERE Age > ?) "
        "SELECT Name FROM t WHERE {{Length(t.Name)}} > ? AND Country <> ?",
        "WITH t AS (SELECT * FROM singer WHERE Age > ?) "
        "SELECT Name FROM t WHERE length(Name) > ? AND Country <> ?",
        params=(26, 9, "Netherlands"),
        exact={"Length": "SELECT DISTINCT Name FROM singer WHERE Age > 26 "
                         "AND Country <> 'Netherlands'"},
    ),
    Pair(
        "question_with_escaped_quote", CS,
        "SELECT Name FROM stadium WHERE {{StartsWith('Queen''s', stadium.Location)}} = TRUE",
        "SELECT Name FROM stadium WHERE substr(Location, 1, 7) = 'Queen''s'",
        exact={"StartsWith": "SELECT DISTINCT Location FROM stadium"},
    ),
    Pair(
        "question_non_ascii", WORLD,
        "SELECT Code FROM country WHERE {{StartsWith('Cô', country.Name)}} = TRUE",
        "SELECT Code FROM country WHERE substr(Name, 1, 2) = 'Cô'",
        exact={"StartsWith": "SELECT DISTINCT Name FROM country"},
    ),
    Pair(
        "question_is_a_number", WORLD,
        "SELECT Name FROM country WHERE {{StartsWith(19, country.IndepYear)}} = TRUE "
        "AND Continent = 'Oceania'",
        "SELECT Name FROM country WHERE substr(CAST(IndepYear AS TEXT), 1, 2) = '19' "
        "AND Continent = 'Oceania'",
        exact={"StartsWith": "SELECT DISTINCT IndepYear FROM country "
                             "WHERE Continent = 'Oceania' AND IndepYear IS NOT NULL"},
    ),
    Pair(
        "no_candidates_at_all", CS,
        "SELECT COUNT(*) FROM singer WHERE Age > 100 AND {{StartsWith('J', singer.Name)}} = TRUE",
        "SELECT COUNT(*) FROM singer WHERE Age > 100 AND substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE Age > 100"},
    ),
    Pair(
        "ambiguous_column_names_across_join", CS,
        "SELECT s.Name, st.Name FROM singer s JOIN singer_in_concert sic "
        "ON s.Singer_ID = sic.Singer_ID JOIN concert c ON c.concert_ID = sic.concert_ID "
        "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID "
        "WHERE {{Length(st.Name)}} > {{Length(s.Name)}}",
        "SELECT s.Name, st.Name FROM singer s JOIN singer_in_concert sic "
        "ON s.Singer_ID = sic.Singer_ID JOIN concert c ON c.concert_ID = sic.concert_ID "
        "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID WHERE length(st.Name) > length(s.Name)",
        within={"Length": "SELECT Name FROM singer UNION SELECT Name FROM stadium"},
        needs={"Length": "SELECT st.Name FROM singer_in_concert sic "
                         "JOIN concert c ON c.concert_ID = sic.concert_ID "
                         "JOIN stadium st ON st.Stadium_ID = c.Stadium_ID"},
    ),
    # ----------------------------------------- self-joins, windows, odd places
    Pair(
        "self_join_two_aliases_two_questions", EMP,
        "SELECT a.Name, b.Name FROM employee a JOIN employee b ON a.City = b.City "
        "AND a.Employee_ID < b.Employee_ID "
        "WHERE {{StartsWith('M', a.Name)}} AND {{StartsWith('S', b.Name)}}",
        "SELECT a.Name, b.Name FROM employee a JOIN employee b ON a.City = b.City "
        "AND a.Employee_ID < b.Employee_ID "
        "WHERE substr(a.Name, 1, 1) = 'M' AND substr(b.Name, 1, 1) = 'S'",
        within={"StartsWith": "SELECT Name FROM employee"},
    ),
    Pair(
        "self_join_same_call_both_aliases", EMP,
        "SELECT a.Name, b.Name FROM employee a JOIN employee b ON a.City = b.City "
        "WHERE {{Length(a.Name)}} > {{Length(b.Name)}}",
        "SELECT a.Name, b.Name FROM employee a JOIN employee b ON a.City = b.City "
        "WHERE length(a.Name) > length(b.Name)",
        within={"Length": "SELECT Name FROM employee"},
    ),
    Pair(
        "select_star_with_map_filter", CS,
        "SELECT * FROM singer WHERE {{StartsWith('J', singer.Name)}}",
        "SELECT * FROM singer WHERE substr(Name, 1, 1) = 'J'",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "map_over_aggregate_in_having", CS,
        "SELECT Country FROM singer GROUP BY Country HAVING {{Length(MAX(singer.Name))}} > 10",
        "SELECT Country FROM singer GROUP BY Country HAVING length(MAX(Name)) > 10",
        within={"Length": "SELECT MAX(Name) FROM singer GROUP BY Country"},
    ),
    Pair(
        "cte_with_ingredient_used_twice", CS,
        "WITH j AS (SELECT * FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE) "
        "SELECT a.Name, b.Name FROM j a JOIN j b ON a.Singer_ID < b.Singer_ID",
        "WITH j AS (SELECT * FROM singer WHERE substr(Name, 1, 1) = 'J') "
        "SELECT a.Name, b.Name FROM j a JOIN j b ON a.Singer_ID < b.Singer_ID",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "left_join_ingredient_keeps_unmatched", WORLD,
        "SELECT co.Name, ci.Name FROM country co LEFT JOIN city ci "
        "ON {{LowerJoin(co.Capital, ci.ID)}} "
        "WHERE co.Region = 'Antarctica' OR co.Region = 'Polynesia'",
        "SELECT co.Name, ci.Name FROM country co LEFT JOIN city ci "
        "ON lower(trim(co.Capital)) = lower(trim(ci.ID)) "
        "WHERE co.Region = 'Antarctica' OR co.Region = 'Polynesia'",
        within={"LowerJoin": "SELECT Capital FROM country",
                "LowerJoin.right": "SELECT ID FROM city"},
    ),
    Pair(
        "join_ingredient_and_plain_on", WORLD,
        "SELECT co.Name, ci.Name FROM country co JOIN city ci "
        "ON {{LowerJoin(co.Capital, ci.ID)}} AND ci.Population > 1000000 "
        "WHERE co.Continent = 'Europe'",
        "SELECT co.Name, ci.Name FROM country co JOIN city ci "
        "ON lower(trim(co.Capital)) = lower(trim(ci.ID)) AND ci.Population > 1000000 "
        "WHERE co.Continent = 'Europe'",
        within={"LowerJoin": "SELECT Capital FROM country",
                "LowerJoin.right": "SELECT ID FROM city"},
        needs={"LowerJoin": "SELECT co.Capital FROM country co JOIN city ci ON co.Capital = ci.ID "
                            "WHERE ci.Population > 1000000 AND co.Continent = 'Europe'"},
    ),
    Pair(
        "window_partition_by_map", CS,
        "SELECT Name, RANK() OVER (PARTITION BY {{Length(singer.Country)}} ORDER BY Age) "
        "FROM singer",
        "SELECT Name, RANK() OVER (PARTITION BY length(Country) ORDER BY Age) FROM singer",
        exact={"Length": "SELECT DISTINCT Country FROM singer"},
    ),
    Pair(
        "distinct_map_order_by_alias", CS,
        "SELECT DISTINCT {{Length(singer.Country)}} AS n FROM singer ORDER BY n DESC",
        "SELECT DISTINCT length(Country) AS n FROM singer ORDER BY n DESC",
        order="exact",
        exact={"Length": "SELECT DISTINCT Country FROM singer"},
    ),
    Pair(
        "case_expression_as_map_value", CS,
        "SELECT Name FROM singer WHERE "
        "{{Length(CASE WHEN Age > 30 THEN singer.Name ELSE singer.Country END)}} > 9",
        "SELECT Name FROM singer WHERE "
        "length(CASE WHEN Age > 30 THEN Name ELSE Country END) > 9",
        exact={"Length": "SELECT DISTINCT CASE WHEN Age > 30 THEN Name ELSE Country END "
                         "FROM singer"},
    ),
    Pair(
        "param_as_question", CS,
        "SELECT Name FROM singer WHERE {{StartsWith(?, singer.Name)}} = TRUE AND Age > ?",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = ? AND Age > ?",
        params=("J", 30),
        exact={"StartsWith": "SELECT DISTINCT Name FROM singer WHERE Age > 30"},
    ),
    Pair(
        "map_in_scalar_subquery_aggregate", CS,
        "SELECT Name FROM singer WHERE Age > "
        "(SELECT AVG(Age) FROM singer WHERE {{StartsWith('T', singer.Name)}})",
        "SELECT Name FROM singer WHERE Age > "
        "(SELECT AVG(Age) FROM singer WHERE substr(Name, 1, 1) = 'T')",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "union_order_limit_over_compound", CS,
        "SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE\n"
        "UNION\nSELECT Name FROM stadium WHERE {{StartsWith('J', stadium.Name)}} = FALSE "
        "ORDER BY 1 LIMIT 4",
        "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J' UNION SELECT Name FROM stadium "
        "WHERE (substr(Name, 1, 1) = 'J') = FALSE ORDER BY 1 LIMIT 4",
        order="exact",
        within={"StartsWith": "SELECT Name FROM singer UNION SELECT Name FROM stadium"},
    ),
    # ------------------------------------------------ output type fidelity
    Pair(
        "map_output_types_preserved", CS,
        "SELECT Name, typeof({{Length(singer.Name)}}), typeof({{StartsWith('J', singer.Name)}}), "
        "typeof({{Upper(singer.Age)}}), {{Length(singer.Name)}} / 2, "
        "{{StartsWith('J', singer.Name)}} || '' FROM singer",
        "SELECT Name, typeof(length(Name)), typeof(substr(Name, 1, 1) = 'J'), "
        "typeof(upper(Age)), length(Name) / 2, (substr(Name, 1, 1) = 'J') || '' FROM singer",
        within={"Length": ALL_SINGER_NAMES, "StartsWith": ALL_SINGER_NAMES,
                "Upper": "SELECT Age FROM singer"},
    ),
    Pair(
        "qa_output_types_preserved", CS,
        "SELECT typeof({{MaxOption('q', options='singer::Age')}}), "
        "{{CountRows('q', (SELECT * FROM concert))}} / 4, "
        "typeof({{MaxOption('q', options='singer::Song_release_year')}}), "
        "{{MaxOption('q', options='singer::Song_release_year')}} || 'x'",
        "SELECT typeof((SELECT MAX(Age) FROM singer)), "
        "(SELECT COUNT(*) FROM (SELECT * FROM concert)) / 4, "
        "typeof((SELECT MAX(Song_release_year) FROM singer)), "
        "(SELECT MAX(Song_release_year) FROM singer) || 'x'",
    ),
    Pair(
        "qa_text_of_digits_compared_as_text", CS,
        "SELECT Name FROM singer WHERE Song_release_year = "
        "{{MaxOption('Latest year?', options='singer::Song_release_year')}}",
        "SELECT Name FROM singer WHERE Song_release_year = "
        "(SELECT MAX(Song_release_year) FROM singer)",
    ),
    # ------------- predicates in non-monotone places (relaxing to TRUE is unsound)
    Pair(
        "predicate_compared_with_plain_predicate", CS,
        "SELECT Name FROM singer WHERE ({{StartsWith('J', singer.Name)}} = TRUE) = (Age > 40)",
        "SELECT Name FROM singer WHERE (substr(Name, 1, 1) = 'J') = (Age > 40)",
        exact={"StartsWith": ALL_SINGER_NAMES},
    ),
    Pair(
        "two_predicates_compared_equal", CS,
        "SELECT Name FROM singer WHERE ({{StartsWith('J', singer.Name)}} = TRUE) "
        "= ({{Length(singer.Name)}} > 10)",
        "SELECT Name FROM singer WHERE (substr(Name, 1, 1) = 'J') = (length(Name) > 10)",
        exact={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "two_predicates_compared_not_equal", CS,
        "SELECT Name FROM singer WHERE ({{StartsWith('J', singer.Name)}} = TRUE) "
        "<> ({{Length(singer.Name)}} > 10)",
        "SELECT Name FROM singer WHERE (substr(Name, 1, 1) = 'J') <> (length(Name) > 10)",
        exact={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "and_of_predicates_compared_with_zero", CS,
        "SELECT Name FROM singer WHERE "
        "({{StartsWith('J', singer.Name)}} AND {{Length(singer.Name)}} > 10) = 0",
        "SELECT Name FROM singer WHERE (substr(Name, 1, 1) = 'J' AND length(Name) > 10) = 0",
        within={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
        needs={"StartsWith": "SELECT Name FROM singer WHERE length(Name) > 10",
               "Length": "SELECT Name FROM singer WHERE substr(Name, 1, 1) = 'J'"},
    ),
    Pair(
        "and_of_predicates_is_false", CS,
        "SELECT Name FROM singer WHERE "
        "({{StartsWith('J', singer.Name)}} AND {{Length(singer.Name)}} > 10) IS FALSE",
        "SELECT Name FROM singer WHERE "
        "(substr(Name, 1, 1) = 'J' AND length(Name) > 10) IS FALSE",
        within={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "case_inverts_and_of_predicates", CS,
        "SELECT Name FROM singer WHERE CASE WHEN {{StartsWith('J', singer.Name)}} "
        "AND {{Length(singer.Name)}} > 10 THEN 0 ELSE 1 END = 1",
        "SELECT Name FROM singer WHERE CASE WHEN substr(Name, 1, 1) = 'J' "
        "AND length(Name) > 10 THEN 0 ELSE 1 END = 1",
        within={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "arithmetic_inverts_and_of_predicates", CS,
        "SELECT Name FROM singer WHERE "
        "1 - ({{StartsWith('J', singer.Name)}} AND {{Length(singer.Name)}} > 10)",
        "SELECT Name FROM singer WHERE 1 - (substr(Name, 1, 1) = 'J' AND length(Name) > 10)",
        within={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "predicate_is_not_predicate", CS,
        "SELECT Name FROM singer WHERE {{Length(singer.Name)}} > 10 "
        "IS NOT ({{StartsWith('J', singer.Name)}} = TRUE)",
        "SELECT Name FROM singer WHERE length(Name) > 10 IS NOT (substr(Name, 1, 1) = 'J')",
        exact={"StartsWith": ALL_SINGER_NAMES, "Length": ALL_SINGER_NAMES},
    ),
    Pair(
        "left_anti_join_with_join_ingredient", WORLD,
        "SELECT co.Name FROM country co LEFT JOIN city ci "
        "ON {{LowerJoin(co.Capital, ci.ID)}} WHERE ci.ID IS NULL",
        "SELECT co.Name FROM country co LEFT JOIN city ci "
        "ON lower(trim(co.Capital)) = lower(trim(ci.ID)) WHERE ci.ID IS NULL",
        within={"LowerJoin": "SELECT Capital FROM country",
                "LowerJoin.right": "SELECT ID FROM city"},
        needs={"LowerJoin": "SELECT Capital FROM country",
               "LowerJoin.right": "SELECT ci.ID FROM country co JOIN city ci "
                                  "ON co.Capital = ci.ID"},
    ),
    Pair(
        "left_anti_join_with_map_in_on", CS,
        "SELECT st.Name FROM stadium st LEFT JOIN concert c ON c.Stadium_ID = st.Stadium_ID "
        "AND {{StartsWith('Week', c.concert_Name)}} WHERE c.concert_ID IS NULL",
        "SELECT st.Name FROM stadium st LEFT JOIN concert c ON c.Stadium_ID = st.Stadium_ID "
        "AND substr(c.concert_Name, 1, 4) = 'Week' WHERE c.concert_ID IS NULL",
        within={"StartsWith": "SELECT concert_Name FROM concert"},
        needs={"StartsWith": "SELECT c.concert_Name FROM concert c "
                             "JOIN stadium st ON c.Stadium_ID = st.Stadium_ID"},
    ),
    Pair(
        "left_join_ingredient_one_to_many_rows", WORLD,
        "SELECT co.Name, COUNT(ci.ID) FROM country co LEFT JOIN city ci "
        "ON {{LowerJoin(co.Code, ci.CountryCode)}} WHERE co.Region = 'Polynesia' "
        "GROUP BY co.Name",
        "SELECT co.Name, COUNT(ci.ID) FROM country co LEFT JOIN city ci "
        "ON lower(trim(co.Code)) = lower(trim(ci.CountryCode)) WHERE co.Region = 'Polynesia' "
        "GROUP BY co.Name",
        within={"LowerJoin": "SELECT Code FROM country",
                "LowerJoin.right": "SELECT CountryCode FROM city"},
        needs={"LowerJoin": "SELECT Code FROM country WHERE Region = 'Polynesia' "
                            "AND Code IN (SELECT CountryCode FROM city)"},
    ),
]

# ------------------------------------------- lazy evaluation under LIMIT (scan order)
# Added with the call-saving optimisations: the map filter is the only undecided
# predicate of a LIMIT scope, so the engine evaluates it in batches in SQLite's scan
# order and stops once LIMIT + OFFSET rows qualify. The twins run in the same scan
# order (no index on the filtered columns), so the rows must match exactly, in order.
PAIRS += [
    Pair(
        "lazy_limit_scan_order", WORLD,
        "SELECT ID, Name FROM city WHERE {{StartsWith('San', city.Name)}} LIMIT 5",
        "SELECT ID, Name FROM city WHERE substr(CAST(Name AS TEXT), 1, 3) = 'San' LIMIT 5",
        order="exact",
    ),
    Pair(
        "lazy_limit_offset_plain_first", WORLD,
        "SELECT Name FROM city WHERE Population > 100000 "
        "AND {{StartsWith('B', city.Name)}} = TRUE LIMIT 4 OFFSET 3",
        "SELECT Name FROM city WHERE Population > 100000 "
        "AND substr(CAST(Name AS TEXT), 1, 1) = 'B' LIMIT 4 OFFSET 3",
        order="exact",
    ),
    Pair(
        "lazy_limit_plain_order_by", WORLD,
        "SELECT Name, Population FROM city WHERE {{StartsWith('S', city.Name)}} "
        "ORDER BY Population DESC, ID LIMIT 3",
        "SELECT Name, Population FROM city WHERE substr(CAST(Name AS TEXT), 1, 1) = 'S' "
        "ORDER BY Population DESC, ID LIMIT 3",
        order="exact",
    ),
    Pair(
        "lazy_limit_join_scope", WORLD,
        "SELECT ci.Name, co.Name FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE {{StartsWith('S', ci.Name)}} ORDER BY ci.ID LIMIT 4",
        "SELECT ci.Name, co.Name FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE substr(CAST(ci.Name AS TEXT), 1, 1) = 'S' ORDER BY ci.ID LIMIT 4",
        order="exact",
    ),
    Pair(
        "lazy_limit_after_cascade", WORLD,
        "SELECT ID FROM city WHERE {{StartsWith('S', city.Name)}} "
        "AND {{Length(city.District)}} > 8 ORDER BY ID LIMIT 3",
        "SELECT ID FROM city WHERE substr(CAST(Name AS TEXT), 1, 1) = 'S' "
        "AND length(District) > 8 ORDER BY ID LIMIT 3",
        order="exact",
    ),
    Pair(
        "lazy_limit_null_output_passes", WORLD,
        "SELECT Code FROM country WHERE {{Upper(country.IndepYear)}} IS NULL "
        "ORDER BY Code LIMIT 3",
        "SELECT Code FROM country WHERE upper(IndepYear) IS NULL ORDER BY Code LIMIT 3",
        order="exact",
    ),
    Pair(
        "lazy_limit_in_derived_table", CS,
        "SELECT t.Name FROM (SELECT Name, Singer_ID FROM singer "
        "WHERE {{StartsWith('J', singer.Name)}} ORDER BY Singer_ID LIMIT 1) t",
        "SELECT t.Name FROM (SELECT Name, Singer_ID FROM singer "
        "WHERE substr(Name, 1, 1) = 'J' ORDER BY Singer_ID LIMIT 1) t",
        order="exact",
    ),
]
PAIRS += [
    Pair(
        # LIMIT counts the aggregate's one row, not source rows: every value is needed
        "aggregate_projection_under_limit", WORLD,
        "SELECT MAX({{Length(city.Name)}}) FROM city LIMIT 1",
        "SELECT MAX(length(Name)) FROM city LIMIT 1",
        order="exact",
        exact={"Length": "SELECT Name FROM city"},
    ),
]

# ------------------------------------------- projection-only maps (computed after SQL)
# Added with blendsql.plan.project: a map call that is a whole output column and is
# used nowhere else is computed on the final rows, so it sees exactly the result's
# distinct values (after WHERE, joins, GROUP BY and LIMIT).
PAIRS += [
    Pair(
        "late_map_after_filter_and_limit", WORLD,
        "SELECT ID, {{Length(city.Name)}} AS n FROM city WHERE CountryCode = 'NLD' "
        "ORDER BY ID LIMIT 5",
        "SELECT ID, length(Name) AS n FROM city WHERE CountryCode = 'NLD' ORDER BY ID LIMIT 5",
        order="exact",
        exact={"Length": "SELECT Name FROM city WHERE CountryCode = 'NLD' "
                         "ORDER BY ID LIMIT 5"},
    ),
    Pair(
        "late_map_on_group_key", WORLD,
        "SELECT {{Upper(city.CountryCode)}}, COUNT(*) FROM city "
        "WHERE Population > 5000000 GROUP BY city.CountryCode",
        "SELECT upper(CountryCode), COUNT(*) FROM city "
        "WHERE Population > 5000000 GROUP BY CountryCode",
        exact={"Upper": "SELECT CountryCode FROM city WHERE Population > 5000000"},
    ),
    Pair(
        "late_map_over_join_with_null_values", WORLD,
        "SELECT co.Code, {{Upper(co.IndepYear)}} FROM country co "
        "JOIN countrylanguage cl ON cl.CountryCode = co.Code "
        "WHERE cl.Language = 'Dutch' ORDER BY co.Code",
        "SELECT co.Code, upper(co.IndepYear) FROM country co "
        "JOIN countrylanguage cl ON cl.CountryCode = co.Code "
        "WHERE cl.Language = 'Dutch' ORDER BY co.Code",
        order="exact",
        exact={"Upper": "SELECT co.IndepYear FROM country co JOIN countrylanguage cl "
                        "ON cl.CountryCode = co.Code WHERE cl.Language = 'Dutch' "
                        "AND co.IndepYear IS NOT NULL"},
    ),
    Pair(
        "late_map_next_to_filter_map", CS,
        "SELECT Name, {{Length(singer.Country)}} FROM singer "
        "WHERE {{StartsWith('J', singer.Name)}} = TRUE",
        "SELECT Name, length(Country) FROM singer WHERE substr(Name, 1, 1) = 'J'",
        exact={"Length": "SELECT Country FROM singer WHERE substr(Name, 1, 1) = 'J'"},
    ),
    Pair(
        "map_alias_used_in_order_by_stays_early", CS,
        "SELECT Name, {{Length(singer.Name)}} AS n FROM singer ORDER BY n, Name",
        "SELECT Name, length(Name) AS n FROM singer ORDER BY n, Name",
        order="exact",
    ),
    Pair(
        "map_projection_with_distinct_stays_early", CS,
        "SELECT DISTINCT {{Length(singer.Country)}} FROM singer",
        "SELECT DISTINCT length(Country) FROM singer",
    ),
]

# ------------------------------------------- pre-aggregation (map call as a GROUP BY key)
# Added with blendsql.plan.preagg: a map call that is a GROUP BY key is computed by one
# partial-aggregate scan grouped by its raw value; the map sees that scan's distinct
# non-NULL values and the final query merges the groups whose values map alike.
PAIRS += [
    Pair(
        "preagg_count_sum_min_max_merging_groups", WORLD,
        "SELECT {{Length(city.District)}} AS n, COUNT(*), SUM(Population), MIN(Name), "
        "MAX(Population) FROM city GROUP BY n",
        "SELECT length(District) AS n, COUNT(*), SUM(Population), MIN(Name), "
        "MAX(Population) FROM city GROUP BY n",
        exact={"Length": "SELECT District FROM city"},
    ),
    Pair(
        "preagg_avg_total_count_with_nulls_and_where", WORLD,
        "SELECT {{Length(country.Region)}} AS n, AVG(LifeExpectancy), TOTAL(IndepYear), "
        "COUNT(IndepYear), AVG(IndepYear), SUM(Capital) FROM country "
        "WHERE Population > 100000 GROUP BY n",
        "SELECT length(Region) AS n, AVG(LifeExpectancy), TOTAL(IndepYear), "
        "COUNT(IndepYear), AVG(IndepYear), SUM(Capital) FROM country "
        "WHERE Population > 100000 GROUP BY n",
        exact={"Length": "SELECT Region FROM country WHERE Population > 100000"},
    ),
    Pair(
        # Antarctica's group has no IndepYear at all: AVG / SUM are NULL, TOTAL 0.0
        "preagg_avg_of_no_values_is_null", WORLD,
        "SELECT {{Upper(country.Continent)}} AS c, AVG(IndepYear), SUM(IndepYear), "
        "TOTAL(IndepYear), COUNT(IndepYear), MIN(IndepYear) FROM country GROUP BY c",
        "SELECT upper(Continent) AS c, AVG(IndepYear), SUM(IndepYear), "
        "TOTAL(IndepYear), COUNT(IndepYear), MIN(IndepYear) FROM country GROUP BY c",
        exact={"Upper": "SELECT Continent FROM country"},
    ),
    Pair(
        "preagg_null_values_form_their_own_group", WORLD,
        "SELECT {{Length(country.IndepYear)}} AS n, COUNT(*), MAX(Name) FROM country "
        "GROUP BY n",
        "SELECT length(IndepYear) AS n, COUNT(*), MAX(Name) FROM country GROUP BY n",
        exact={"Length": "SELECT IndepYear FROM country WHERE IndepYear IS NOT NULL"},
    ),
    Pair(
        "preagg_having_and_order_by_alias", WORLD,
        "SELECT {{Length(city.Name)}} AS n, COUNT(*) AS c FROM city "
        "WHERE CountryCode = 'USA' GROUP BY n HAVING COUNT(*) > 5 ORDER BY c DESC, n",
        "SELECT length(Name) AS n, COUNT(*) AS c FROM city "
        "WHERE CountryCode = 'USA' GROUP BY n HAVING COUNT(*) > 5 ORDER BY c DESC, n",
        order="exact",
        exact={"Length": "SELECT Name FROM city WHERE CountryCode = 'USA'"},
    ),
    Pair(
        "preagg_order_by_aggregate_and_ordinal_limit", WORLD,
        "SELECT {{Length(city.District)}} AS n, SUM(Population) FROM city "
        "GROUP BY n ORDER BY SUM(Population) DESC, 1 LIMIT 4",
        "SELECT length(District) AS n, SUM(Population) FROM city "
        "GROUP BY n ORDER BY SUM(Population) DESC, 1 LIMIT 4",
        order="exact",
    ),
    Pair(
        "preagg_having_on_alias_of_aggregate_and_key", WORLD,
        "SELECT {{Upper(country.Continent)}} AS c, MAX(Population) AS m FROM country "
        "GROUP BY c HAVING m > 100000000 AND c <> 'ASIA'",
        "SELECT upper(Continent) AS c, MAX(Population) AS m FROM country "
        "GROUP BY c HAVING m > 100000000 AND c <> 'ASIA'",
    ),
    Pair(
        "preagg_join_in_from", WORLD,
        "SELECT {{Length(co.Continent)}} AS n, COUNT(*), MAX(ci.Population), "
        "AVG(ci.Population) FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE co.Region LIKE '%Europe%' GROUP BY n",
        "SELECT length(co.Continent) AS n, COUNT(*), MAX(ci.Population), "
        "AVG(ci.Population) FROM city ci JOIN country co ON ci.CountryCode = co.Code "
        "WHERE co.Region LIKE '%Europe%' GROUP BY n",
        exact={"Length": "SELECT co.Continent FROM city ci JOIN country co "
                         "ON ci.CountryCode = co.Code WHERE co.Region LIKE '%Europe%'"},
    ),
    Pair(
        "preagg_call_in_group_by_with_other_key", WORLD,
        "SELECT Continent, COUNT(*), SUM(Population) FROM country "
        "GROUP BY {{Length(country.Region)}}, Continent",
        "SELECT Continent, COUNT(*), SUM(Population) FROM country "
        "GROUP BY length(Region), Continent",
        exact={"Length": "SELECT Region FROM country"},
    ),
    Pair(
        "preagg_distinct_over_call_expression", WORLD,
        "SELECT DISTINCT {{Length(country.Region)}} > 10, COUNT(*) > 5 FROM country "
        "GROUP BY {{Length(country.Region)}}",
        "SELECT DISTINCT length(Region) > 10, COUNT(*) > 5 FROM country "
        "GROUP BY length(Region)",
    ),
    Pair(
        "preagg_same_call_in_projection_and_group_by", CS,
        "SELECT {{Length(singer.Country)}}, COUNT(*), AVG(Age) FROM singer "
        "GROUP BY {{Length(singer.Country)}}",
        "SELECT length(Country), COUNT(*), AVG(Age) FROM singer GROUP BY length(Country)",
    ),
    Pair(
        "preagg_after_where_ingredient", WORLD,
        "SELECT {{Length(city.District)}} AS n, COUNT(*) FROM city "
        "WHERE {{StartsWith('S', city.Name)}} = TRUE AND Population > 100000 GROUP BY n",
        "SELECT length(District) AS n, COUNT(*) FROM city "
        "WHERE substr(Name, 1, 1) = 'S' AND Population > 100000 GROUP BY n",
        exact={"Length": "SELECT District FROM city WHERE substr(Name, 1, 1) = 'S' "
                         "AND Population > 100000",
               "StartsWith": "SELECT Name FROM city WHERE Population > 100000"},
    ),
    Pair(
        "preagg_limit_without_order", WORLD,
        "SELECT {{Length(city.District)}} AS n, COUNT(*) FROM city GROUP BY n LIMIT 3",
        "SELECT length(District) AS n, COUNT(*) FROM city GROUP BY n LIMIT 3",
        order="sample",
        sample_of="SELECT length(District) AS n, COUNT(*) FROM city GROUP BY n",
    ),
    Pair(
        "preagg_in_derived_table_with_cte", WORLD,
        "WITH big AS (SELECT * FROM city WHERE Population > 500000) "
        "SELECT n, c FROM (SELECT {{Length(big.District)}} AS n, COUNT(*) AS c FROM big "
        "GROUP BY n) WHERE c > 3",
        "WITH big AS (SELECT * FROM city WHERE Population > 500000) "
        "SELECT n, c FROM (SELECT length(District) AS n, COUNT(*) AS c FROM big "
        "GROUP BY n) WHERE c > 3",
        exact={"Length": "SELECT District FROM city WHERE Population > 500000"},
    ),
    Pair(
        # fall back: GROUP_CONCAT / COUNT(DISTINCT) are not combinable from partials
        "preagg_refused_group_concat_count_distinct", CS,
        "SELECT {{Length(singer.Country)}} AS n, COUNT(DISTINCT Age), "
        "GROUP_CONCAT(Name, '|') IS NOT NULL FROM singer GROUP BY n",
        "SELECT length(Country) AS n, COUNT(DISTINCT Age), "
        "GROUP_CONCAT(Name, '|') IS NOT NULL FROM singer GROUP BY n",
    ),
    Pair(
        "preagg_expression_aggregates_and_key_arithmetic", PETS,
        "SELECT {{Length(Student.city_code)}} * 10 AS k, SUM(Age * 2), "
        "MAX(Age) - MIN(Age), COUNT(Advisor) FROM Student "
        "GROUP BY {{Length(Student.city_code)}}",
        "SELECT length(city_code) * 10 AS k, SUM(Age * 2), MAX(Age) - MIN(Age), "
        "COUNT(Advisor) FROM Student GROUP BY length(city_code)",
    ),
]
PAIRS += [
    Pair(
        # GROUP BY 1 groups by the map's output: the call must not move after SQL
        "map_projection_grouped_by_ordinal", WORLD,
        "SELECT {{Length(country.Region)}}, COUNT(*) FROM country GROUP BY 1",
        "SELECT length(Region), COUNT(*) FROM country GROUP BY 1",
    ),
]

# ---------------------------------------------------------------- identical calls, constraints, limits
NLD = "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD'"
RECURSIVE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) "
PAIRS += [
    # 1. identical calls: one evaluation (each value once), one constraint
    Pair(
        "shared_call_where_and_select", WORLD,
        "SELECT Name, {{Length(city.Name)}} AS n FROM city "
        "WHERE CountryCode = 'NLD' AND {{Length(city.Name)}} > 8",
        "SELECT Name, length(Name) AS n FROM city WHERE CountryCode = 'NLD' AND length(Name) > 8",
        exact={"Length": NLD}, once=("Length",),
    ),
    Pair(
        "shared_call_spelled_three_ways", WORLD,
        "SELECT Name, {{Length('city::Name')}} FROM city "
        "WHERE CountryCode = 'NLD' AND {{Length(Name)}} > 8 AND {{Length(city.Name)}} < 12",
        "SELECT Name, length(Name) FROM city WHERE CountryCode = 'NLD' AND length(Name) > 8 "
        "AND length(Name) < 12",
        exact={"Length": NLD}, once=("Length",),
    ),
    Pair(
        "shared_call_where_and_order_by", WORLD,
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{Length(city.Name)}} > 8 "
        "ORDER BY {{Length(city.Name)}} DESC, Name",
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND length(Name) > 8 "
        "ORDER BY length(Name) DESC, Name",
        order="exact", exact={"Length": NLD},
    ),
    Pair(
        "shared_call_outer_and_subquery", WORLD,
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('A', city.Name)}} "
        "AND ID IN (SELECT ID FROM city WHERE Population > 150000 "
        "AND {{StartsWith('A', city.Name)}})",
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND substr(Name, 1, 1) = 'A' "
        "AND ID IN (SELECT ID FROM city WHERE Population > 150000 AND substr(Name, 1, 1) = 'A')",
        needs={"StartsWith": "SELECT Name FROM city WHERE Population > 150000"},
        once=("StartsWith",),
    ),
    # 2. a SELECT alias used in WHERE / inside a call, resolved as SQLite does
    Pair(
        "alias_of_call_in_where", WORLD,
        "SELECT Name, {{StartsWith('N', city.District)}} AS f FROM city "
        "WHERE CountryCode = 'NLD' AND f = TRUE",
        "SELECT Name, substr(District, 1, 1) = 'N' AS f FROM city "
        "WHERE CountryCode = 'NLD' AND f = TRUE",
        exact={"StartsWith": "SELECT DISTINCT District FROM city WHERE CountryCode = 'NLD'"},
        once=("StartsWith",),
    ),
    Pair(
        "alias_of_call_in_where_limit", WORLD,
        "SELECT Name, {{StartsWith('Z', city.District)}} AS f FROM city "
        "WHERE f = TRUE AND CountryCode = 'NLD' LIMIT 2",
        "SELECT Name, substr(District, 1, 1) = 'Z' AS f FROM city "
        "WHERE f = TRUE AND CountryCode = 'NLD' LIMIT 2",
        order="sample",
        sample_of="SELECT Name, substr(District, 1, 1) = 'Z' AS f FROM city "
        "WHERE f = TRUE AND CountryCode = 'NLD'",
        within={"StartsWith": "SELECT DISTINCT District FROM city WHERE CountryCode = 'NLD'"},
        once=("StartsWith",),
    ),
    Pair(
        "alias_of_call_negated_in_where", WORLD,
        "SELECT Name, {{StartsWith('Z', city.District)}} AS f FROM city "
        "WHERE CountryCode = 'NLD' AND NOT f",
        "SELECT Name, substr(District, 1, 1) = 'Z' AS f FROM city "
        "WHERE CountryCode = 'NLD' AND NOT f",
    ),
    Pair(
        "alias_inside_having_call", WORLD,
        "SELECT {{StartsWith('N', city.CountryCode)}} AS g, COUNT(*) FROM city "
        "GROUP BY g HAVING {{StartsWith('1', g)}}",
        "SELECT substr(CountryCode, 1, 1) = 'N' AS g, COUNT(*) FROM city "
        "GROUP BY g HAVING substr(CAST(g AS TEXT), 1, 1) = '1'",
    ),
    Pair(
        "alias_of_plain_expression_inside_call", WORLD,
        "SELECT upper(Name) AS u FROM city "
        "WHERE CountryCode = 'NLD' AND {{StartsWith('A', u)}}",
        "SELECT upper(Name) AS u FROM city WHERE CountryCode = 'NLD' AND substr(u, 1, 1) = 'A'",
    ),
    Pair(
        "alias_shadowed_by_a_real_column", WORLD,
        "SELECT {{Length(city.District)}} AS Name FROM city WHERE Name = 'Amsterdam'",
        "SELECT length(District) AS Name FROM city WHERE Name = 'Amsterdam'",
    ),
    # 3. several value columns: the values are tuples
    Pair(
        "multi_column_map_in_where", WORLD,
        "SELECT Name FROM city WHERE CountryCode = 'NLD' "
        "AND {{Concat('|', city.Name, city.District)}} = 'Utrecht|Utrecht'",
        "SELECT Name FROM city WHERE CountryCode = 'NLD' "
        "AND CAST(Name AS TEXT) || '|' || CAST(District AS TEXT) = 'Utrecht|Utrecht'",
    ),
    Pair(
        "multi_column_map_across_join", WORLD,
        "SELECT a.Name, {{Concat('-', a.Name, b.Code)}} AS k FROM city AS a "
        "JOIN country AS b ON a.CountryCode = b.Code WHERE b.Continent = 'Oceania'",
        "SELECT a.Name, a.Name || '-' || b.Code FROM city AS a "
        "JOIN country AS b ON a.CountryCode = b.Code WHERE b.Continent = 'Oceania'",
    ),
    Pair(
        # IndepYear has NULLs: a tuple with a NULL part maps to NULL; REAL and INTEGER parts
        "multi_column_map_nulls_and_numbers", WORLD,
        "SELECT Name, {{Concat('/', country.Code, country.IndepYear, country.LifeExpectancy)}} "
        "FROM country WHERE Continent = 'Africa'",
        "SELECT Name, Code || '/' || CAST(IndepYear AS TEXT) || '/' || "
        "CAST(LifeExpectancy AS TEXT) FROM country WHERE Continent = 'Africa'",
    ),
    Pair(
        "multi_column_map_limit_lazy", WORLD,
        "SELECT Name FROM city WHERE {{Concat('', city.CountryCode, city.District)}} "
        "= 'NLDNoord-Holland' LIMIT 2",
        "SELECT Name FROM city WHERE CountryCode || District = 'NLDNoord-Holland' LIMIT 2",
        order="sample",
        sample_of="SELECT Name FROM city WHERE CountryCode || District = 'NLDNoord-Holland'",
    ),
    # 4. options=(subquery): the subquery's distinct non-NULL values
    Pair(
        "options_subquery_qa", WORLD,
        "SELECT Name FROM city WHERE Name = {{MaxOption('last?', options=("
        "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD'))}}",
        "SELECT Name FROM city WHERE Name = (SELECT MAX(Name) FROM city "
        "WHERE CountryCode = 'NLD')",
    ),
    Pair(
        "options_subquery_with_nulls", WORLD,
        "SELECT Name FROM country WHERE IndepYear = {{FirstOption('first?', options=("
        "SELECT IndepYear FROM country WHERE Continent = 'Africa'))}}",
        "SELECT Name FROM country WHERE IndepYear = (SELECT MIN(IndepYear) FROM country "
        "WHERE Continent = 'Africa')",
    ),
    # 5. IN / NOT IN with a QA call (a scalar answer is a set of one)
    Pair(
        "in_qa_scalar_without_parens", WORLD,
        "SELECT Name FROM city WHERE Name IN {{MaxOption('q', options=("
        "SELECT Name FROM city WHERE CountryCode = 'NLD'))}}",
        "SELECT Name FROM city WHERE Name IN (SELECT MAX(Name) FROM city "
        "WHERE CountryCode = 'NLD')",
    ),
    Pair(
        "not_in_qa_scalar_in_parens", WORLD,
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND Name NOT IN "
        "(<<FirstOption('q', options=(SELECT Name FROM city WHERE CountryCode = 'NLD'))>>)",
        "SELECT Name FROM city WHERE CountryCode = 'NLD' AND Name NOT IN "
        "(SELECT MIN(Name) FROM city WHERE CountryCode = 'NLD')",
    ),
    Pair(
        "in_qa_count_in_list_position", WORLD,
        "SELECT Name FROM city WHERE ID IN "
        "{{CountRows('how many?', (SELECT 1 FROM city WHERE CountryCode = 'NLD'))}}",
        "SELECT Name FROM city WHERE ID IN "
        "(SELECT COUNT(*) FROM city WHERE CountryCode = 'NLD')",
    ),
    # 6. lazy scan over a (large) recursive CTE, read page by page
    Pair(
        "lazy_recursive_cte_pages", WORLD,
        RECURSIVE + "SELECT x FROM c WHERE {{StartsWith('9', c.x)}} LIMIT 4",
        RECURSIVE + "SELECT x FROM c WHERE substr(CAST(x AS TEXT), 1, 1) = '9' LIMIT 4",
        order="sample",
        sample_of=RECURSIVE + "SELECT x FROM c WHERE substr(CAST(x AS TEXT), 1, 1) = '9'",
    ),
    Pair(
        "lazy_negative_filter", WORLD,
        RECURSIVE + "SELECT x FROM c WHERE x > 5 AND NOT {{StartsWith('1', c.x)}} "
        "LIMIT 3 OFFSET 2",
        RECURSIVE + "SELECT x FROM c WHERE x > 5 AND NOT substr(CAST(x AS TEXT), 1, 1) = '1' "
        "LIMIT 3 OFFSET 2",
        order="sample",
        sample_of=RECURSIVE + "SELECT x FROM c WHERE x > 5 "
        "AND NOT substr(CAST(x AS TEXT), 1, 1) = '1'",
    ),
    # 7. many AND-ed ingredient filters (cost order estimates each once)
    Pair(
        "many_and_filters", WORLD,
        "SELECT Name FROM city WHERE " + " AND ".join(
            [f"{{{{Length(city.Name)}}}} > {k}" for k in range(3)]
            + [f"{{{{StartsWith('{p}', city.CountryCode)}}}} = FALSE" for p in "ABCDEFG"]
            + ["{{Upper(city.District)}} <> 'BUENOS AIRES'",
               "{{StartsWith('S', city.District)}}"]),
        "SELECT Name FROM city WHERE " + " AND ".join(
            [f"length(Name) > {k}" for k in range(3)]
            + [f"substr(CountryCode, 1, 1) <> '{p}'" for p in "ABCDEFG"]
            + ["upper(District) <> 'BUENOS AIRES'", "substr(District, 1, 1) = 'S'"]),
    ),
]
PAIRS += [
    Pair(
        "multi_column_map_group_by_key", WORLD,
        "SELECT {{Concat('|', country.Continent, country.Region)}} AS k, COUNT(*) "
        "FROM country GROUP BY k",
        "SELECT Continent || '|' || Region AS k, COUNT(*) FROM country GROUP BY k",
    ),
    Pair(
        "multi_column_map_order_by", WORLD,
        "SELECT Name FROM city WHERE CountryCode = 'NLD' "
        "ORDER BY {{Concat('', city.District, city.Name)}} LIMIT 5",
        "SELECT Name FROM city WHERE CountryCode = 'NLD' ORDER BY District || Name LIMIT 5",
        order="exact",
    ),
    Pair(
        "shared_qa_select_and_where", WORLD,
        "SELECT Name, {{CountRows('n?', (SELECT 1 FROM city WHERE CountryCode = 'NLD'))}} "
        "FROM city WHERE ID < {{CountRows('n?', (SELECT 1 FROM city WHERE CountryCode = 'NLD'))}}",
        "SELECT Name, (SELECT COUNT(*) FROM city WHERE CountryCode = 'NLD') FROM city "
        "WHERE ID < (SELECT COUNT(*) FROM city WHERE CountryCode = 'NLD')",
    ),
    Pair(
        "shared_call_select_where_group_by", WORLD,
        "SELECT {{Length(city.District)}} AS n, COUNT(*) FROM city "
        "WHERE CountryCode = 'NLD' AND {{Length(city.District)}} > 7 "
        "GROUP BY {{Length(city.District)}}",
        "SELECT length(District) AS n, COUNT(*) FROM city "
        "WHERE CountryCode = 'NLD' AND length(District) > 7 GROUP BY length(District)",
        once=("Length",),
    ),
    Pair(
        "alias_of_call_in_where_with_join", WORLD,
        "SELECT ci.Name, {{StartsWith('N', ci.District)}} AS north FROM city AS ci "
        "JOIN country AS co ON ci.CountryCode = co.Code "
        "WHERE co.Code = 'NLD' AND north",
        "SELECT ci.Name, substr(ci.District, 1, 1) = 'N' AS north FROM city AS ci "
        "JOIN country AS co ON ci.CountryCode = co.Code WHERE co.Code = 'NLD' AND north",
        once=("StartsWith",),
    ),
    Pair(
        "alias_of_call_in_where_or", WORLD,
        "SELECT Name, {{Length(city.Name)}} AS n FROM city "
        "WHERE CountryCode = 'NLD' AND (n < 5 OR n > 12)",
        "SELECT Name, length(Name) AS n FROM city "
        "WHERE CountryCode = 'NLD' AND (n < 5 OR n > 12)",
        once=("Length",),
    ),
]
