"""Repair of wrong table / column names in generated programs (no model needed).

The shapes are the ones Qwen2.5-Coder-1.5B wrote on Spider and then repeated on
every retry: a name spelt as the schema's other columns are (``pet_type`` for
``PetType``), one word of a real name (``age`` for ``pet_age``), an abbreviation
(``continentid`` for ``ContId``), a plural dropped (``CAR_DATA``), and a real
column under the alias of the wrong table.
"""

from __future__ import annotations

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.parser import Parser, validate
from blendsql.nl.repair import best_match, repair_names, schema_feedback, similarity, value_mismatch
from blendsql.nl.serialize import list_tables


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE Student (StuID INTEGER, Fname TEXT, Age INTEGER, Sex TEXT);
        CREATE TABLE Pets (PetID INTEGER, PetType TEXT, pet_age INTEGER, weight REAL);
        CREATE TABLE Has_Pet (StuID INTEGER, PetID INTEGER);
        CREATE TABLE continents (ContId INTEGER, Continent TEXT);
        CREATE TABLE cars_data (Id INTEGER, Horsepower INTEGER, Year INTEGER);
        CREATE TABLE car_names (MakeId INTEGER, Model TEXT);
        INSERT INTO Student VALUES (1, 'Linda', 18, 'F'), (2, 'Tracy', 21, 'M');
        INSERT INTO Pets VALUES (10, 'cat', 3, 12.0), (11, 'dog', 1, 9.3), (12, 'dog', 2, 13.4);
        INSERT INTO Has_Pet VALUES (1, 10), (1, 11), (2, 12);
        INSERT INTO continents VALUES (1, 'america'), (2, 'europe');
        INSERT INTO cars_data VALUES (1, 130, 1970), (2, 95, 1971);
        INSERT INTO car_names VALUES (1, 'chevrolet'), (2, 'audi');
        """
    )
    return c


def fix(conn, program):
    bsql = BlendSQL(conn)
    return repair_names(program, list_tables(conn), bsql.registry)


@pytest.mark.parametrize("program, expected", [
    # snake_case where the schema says PetType (and the reverse)
    ("SELECT weight FROM pets WHERE pet_type = 'dog' ORDER BY pet_age LIMIT 1",
     "SELECT weight FROM pets WHERE PetType = 'dog' ORDER BY pet_age LIMIT 1"),
    ("SELECT weight FROM pets ORDER BY petage LIMIT 1", "SELECT weight FROM pets ORDER BY pet_age LIMIT 1"),
    # one word of the real name, the only such column among the tables read
    ("SELECT AVG(age), PetType FROM pets GROUP BY PetType",
     "SELECT AVG(pet_age), PetType FROM pets GROUP BY PetType"),
    # a real column under the wrong alias
    ("SELECT T1.Fname FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID "
     "JOIN Pets AS T3 ON T3.PetID = T2.PetID WHERE T2.PetType = 'cat'",
     "SELECT T1.Fname FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID "
     "JOIN Pets AS T3 ON T3.PetID = T2.PetID WHERE T3.PetType = 'cat'"),
    # an abbreviation beats the longer near-equal word
    ("SELECT T1.continentid FROM continents AS T1", "SELECT T1.ContId FROM continents AS T1"),
    # a misspelt table keeps its written name as alias, so qualified columns resolve
    ("SELECT CAR_DATA.Year FROM CAR_DATA", "SELECT CAR_DATA.Year FROM cars_data AS CAR_DATA"),
])
def test_repair_resolves_the_name_meant(conn, program, expected):
    assert validate(program, conn, BlendSQL(conn).registry) is not None
    got = fix(conn, program)
    assert got == expected
    assert validate(got, conn, BlendSQL(conn).registry) is None


@pytest.mark.parametrize("program", [
    "SELECT Fname FROM Student",                            # nothing wrong
    "SELECT Model FROM car_names ORDER BY horsepower",      # column of a table not read: no guess
    "SELECT Fname FROM Student WHERE Fname = \"Linda\"",   # double-quoted string, SQLite's fallback
    "SELECT COUNT(*) AS n FROM Pets ORDER BY n",            # an output alias is not a column
    "SELECT nothing_like_it FROM Pets",                     # no near name
])
def test_repair_leaves_what_it_cannot_resolve_surely(conn, program):
    assert fix(conn, program) is None


def test_ambiguous_near_names_are_not_guessed():
    assert best_match("name", ["first_name", "last_name"]) is None
    assert best_match("pet_type", ["PetType", "pet_age"]) == "PetType"
    assert similarity("Pet_Type", "PetType") == 100.0


def test_correlated_subquery_column_resolves_in_the_outer_scope(conn):
    program = ("SELECT T1.Fname FROM Student AS T1 WHERE EXISTS "
               "(SELECT 1 FROM Has_Pet AS T2 WHERE T2.StuID = T1.StuID)")
    assert fix(conn, program) is None


def test_feedback_names_the_table_that_holds_the_column(conn):
    program = "SELECT Model FROM car_names ORDER BY horsepower LIMIT 1"
    error = validate(program, conn, BlendSQL(conn).registry)
    text = schema_feedback(error, program, list_tables(conn))
    assert "horsepower is a column of cars_data: join that table" in text
    assert "car_names has the columns: MakeId, Model." in text


def test_parser_repairs_without_another_model_call(conn):
    prompts: list[Request] = []

    def model(req: Request) -> str:
        prompts.append(req)
        return "SELECT weight FROM pets WHERE pet_type = 'dog' ORDER BY petage LIMIT 1"

    parser = Parser(FunctionModel(model), examples=[], n_examples=0)
    result = parser.parse("Weight of the youngest dog?", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT weight FROM pets WHERE PetType = 'dog' ORDER BY pet_age LIMIT 1"
    assert len(prompts) == 1 and result.repairs == 1


def test_retry_prompt_lists_the_real_columns(conn):
    prompts: list[Request] = []
    answers = ["SELECT Model FROM car_names ORDER BY horsepower LIMIT 1",
               "SELECT T1.Model FROM car_names AS T1 JOIN cars_data AS T2 ON T1.MakeId = T2.Id "
               "ORDER BY T2.Horsepower LIMIT 1"]

    def model(req: Request) -> str:
        prompts.append(req)
        return answers[len(prompts) - 1]

    parser = Parser(FunctionModel(model), examples=[], n_examples=0)
    result = parser.parse("Which model has the least horsepower?", conn, BlendSQL(conn).registry)
    assert result.program == answers[1]
    assert "horsepower is a column of cars_data: join that table" in prompts[1].prompt


def test_a_repair_never_makes_a_join_compare_a_column_with_itself(conn):
    # T2 (Has_Pet) has no Age; the only holder is T1, but T1.Age = T1.Age is no join
    program = "SELECT T1.Fname FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.Age = T2.Age"
    assert fix(conn, program) is None


@pytest.fixture()
def flights():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE airlines (uid INTEGER, Airline TEXT, Country TEXT);
        CREATE TABLE airports (City TEXT, AirportCode TEXT);
        CREATE TABLE flights (Airline INTEGER, FlightNo INTEGER, SourceAirport TEXT, DestAirport TEXT);
        INSERT INTO airlines VALUES (1, 'United Airlines', 'USA'), (2, 'JetBlue Airways', 'USA');
        INSERT INTO airports VALUES ('Aberdeen', 'APG'), ('Abilene', 'DYS');
        INSERT INTO flights VALUES (1, 28, 'APG', 'DYS'), (2, 29, 'DYS', 'APG'), (1, 30, 'DYS', 'APG');
        """
    )
    return c


def mismatch(conn, program):
    return value_mismatch(program, conn, BlendSQL(conn).registry, list_tables(conn))


@pytest.mark.parametrize("program, found", [
    # an id column compared with a name another table holds
    ("SELECT COUNT(*) FROM flights WHERE Airline = 'United Airlines'",
     "'United Airlines' is not a value of flights.Airline; it is a value of airlines.Airline"),
    ("SELECT COUNT(*) FROM flights AS T1 WHERE T1.DestAirport IN ('APG', 'ABERDEEN')",
     "'ABERDEEN' is not a value of flights.DestAirport; it is a value of airports.City"),
    ("SELECT AirportCode FROM airports WHERE City = 'aberdeen'",
     "'aberdeen' is not a value of airports.City; it is written 'Aberdeen' there"),
])
def test_value_mismatch_names_the_column_that_holds_the_text(flights, program, found):
    assert found in mismatch(flights, program)


@pytest.mark.parametrize("program", [
    "SELECT COUNT(*) FROM airlines AS T1 JOIN flights AS T2 ON T2.Airline = T1.uid "
    "WHERE T1.Airline = 'United Airlines'",                      # right column
    "SELECT COUNT(*) FROM flights WHERE SourceAirport = 'XYZ'",  # held nowhere: no evidence
    "SELECT COUNT(*) FROM flights WHERE nope = 'APG'",           # unknown column: not this check
])
def test_value_mismatch_is_silent_without_evidence(flights, program):
    assert mismatch(flights, program) is None


def test_parser_retries_a_condition_on_the_wrong_column(flights):
    prompts: list[Request] = []
    answers = ["SELECT COUNT(*) FROM flights WHERE Airline = 'United Airlines'",
               "SELECT COUNT(*) FROM airlines AS T1 JOIN flights AS T2 ON T2.Airline = T1.uid "
               "WHERE T1.Airline = 'United Airlines'"]

    def model(req: Request) -> str:
        prompts.append(req)
        return answers[min(len(prompts), 2) - 1]

    parser = Parser(FunctionModel(model), examples=[], n_examples=0)
    result = parser.parse("How many United Airlines flights?", flights, BlendSQL(flights).registry)
    assert result.program == answers[1]
    assert "it is a value of airlines.Airline" in prompts[1].prompt


def test_parser_keeps_the_program_when_the_model_insists_on_the_text(flights):
    program = "SELECT COUNT(*) FROM flights WHERE Airline = 'United Airlines'"
    calls: list[Request] = []

    def model(req: Request) -> str:
        calls.append(req)
        return program

    parser = Parser(FunctionModel(model), examples=[], n_examples=0)
    result = parser.parse("How many United Airlines flights?", flights, BlendSQL(flights).registry)
    assert result.program == program and len(calls) == 2


def test_a_repair_never_makes_a_join_condition_read_one_table(conn):
    # Has_Pet (T2) has no Fname; Student (T1) does, but T1.StuID = T1.Fname joins nothing
    program = "SELECT T1.Age FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.Fname"
    assert fix(conn, program) is None
    # outside a join condition the same move is a plain repair
    assert fix(conn, "SELECT T1.Age FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID "
                     "WHERE T2.Fname = 'Linda'") == (
        "SELECT T1.Age FROM Student AS T1 JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID "
        "WHERE T1.Fname = 'Linda'")
