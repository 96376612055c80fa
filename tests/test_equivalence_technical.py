"""The equivalence rules and guards on technical and clinical answers: versions, data units, duration
suffixes, identifiers, contrastive qualifiers and dosages. Each case fails when its rule or guard breaks."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence import GUARDS, quantities
from proctor.judging.equivalence.identifiers import identifiers
from proctor.judging.equivalence.quantities import Quantity, same
from proctor.judging.equivalence.units import table
from proctor.judging.equivalence.versions import versions

# --- 1. version strings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference"),
    [("2.1.3", "2.10.3"), ("2.1.0", "2.10.0"), ("version 2.1", "version 2.10"), ("2.10", "2.1")],
)
def test_no_rule_credits_a_version_by_its_numeric_value(answer: str, reference: str) -> None:
    assert _method(answer, reference, "Which release?") is None
    assert _veto(answer, reference, "Which release?") == "reference_version_missing"


def test_versions_are_not_numbers() -> None:
    assert quantities("Release 2.10.3 of the server") == []
    assert versions("v2.1.0 and 2.1.x, kernel 5.4") == ["2.1.0", "2.1.x", "5.4"]
    assert versions("5.4", question="What is the minimum kernel version?") == ["5.4"]
    assert versions("5.4") == []  # a bare decimal is a version only where the question asks for one


def test_the_same_version_written_with_a_v_or_in_a_sentence_is_credited() -> None:
    assert _method("v2.1.0", "2.1.0") == "normalised_match"
    assert _method("Release 2.10.3", "2.10.3") == "contains_reference"
    assert _veto("It shipped in v2.10.3.", "2.10.3") is None


def test_trailing_zero_parts_are_left_to_the_llm() -> None:
    # "2.1" and "2.1.0": neither credited by a rule nor vetoed by the version guard.
    assert _method("2.1.0", "2.1", "Which version?") is None
    assert _veto("2.1.0", "2.1", "Which version?") is None
    assert _veto("5.14", "5.4", "What is the minimum Linux kernel version?") == "reference_version_missing"
    assert _veto("5.4 or later", "5.4", "What is the minimum Linux kernel version?") is None


def test_a_version_the_question_states_is_not_required() -> None:
    q = "What must a cluster on 2.1.x do before upgrading to 2.10.3?"
    assert _veto("Upgrade to 2.8.4 first.", "First upgrade to 2.8.4, then to 2.10.3", q) is None
    assert _veto("Upgrade to 2.8.0 first.", "First upgrade to 2.8.4", q) == "reference_version_missing"


# --- 2. binary and decimal data units ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference", "credited"),
    [
        ("2 GiB", "2GiB", True),
        ("2048 MiB", "2GiB", True),
        ("0.5 MiB", "512KiB", True),
        ("1000 KB", "1 MB", True),
        ("2 GB", "2GiB", False),
        ("20 GiB", "20 GB", False),
        ("512 KB", "512KiB", False),
        ("1024 KB", "1 MB", False),  # a megabyte is 1000 kilobytes (SI), not 1024
        ("1 TB", "1 TiB", False),
    ],
)
def test_binary_and_decimal_units_are_kept_apart(answer: str, reference: str, credited: bool) -> None:
    assert (_method(answer, reference) == "numeric_equivalent") is credited
    assert (_veto(answer, reference) is None) is credited


def test_data_sizes_convert_exactly() -> None:
    assert table().tolerance("data") < table().tolerance("length")  # 1 KiB is only 2.4 % over 1 KB
    assert not same(Quantity(1024, "kb"), Quantity(1, "mb"))
    assert same(Quantity(2_147_483_648, "byte"), Quantity(2, "gib"))


# --- 3. duration suffixes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference", "credited"),
    [
        ("5 minutes", "300s", True),
        ("5min", "300 s", True),
        ("5m", "300s", True),  # beside a time, "5m" is five minutes
        ("1.5 seconds", "1500 ms", True),
        ("30ms", "0.03 s", True),
        ("2h", "120 minutes", True),
        ("300 ms", "300s", False),
        ("15 seconds", "1500 ms", False),
        ("72 minutes", "72 hours", False),
    ],
)
def test_duration_suffixes_are_read_as_units(answer: str, reference: str, credited: bool) -> None:
    assert (_method(answer, reference) == "numeric_equivalent") is credited
    assert (_veto(answer, reference) is None) is credited


def test_five_m_is_metres_beside_a_length() -> None:
    assert _method("5m", "5 metres") == "numeric_equivalent"
    assert _method("5 metres", "5 minutes") is None
    assert not same(Quantity(5, "m", "metres"), Quantity(300, "s"))


# --- 4. identifiers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference", "question"),
    [
        ("-N", "-n", "What is the short form of the --namespace flag?"),
        ("--dryrun", "--dry-run", "Which flag prints the count only?"),
        ("tarnbrook_cache", "tarnbrook-cache", "What is the name of the package?"),
        ("TBCACHE_CONF", "TBCACHE_CONFIG", "Which variable names the file?"),
        ("tbcache_config", "TBCACHE_CONFIG", "Which variable names the file?"),
        ("max-memory", "maxmemory", "What was the key max_memory called before?"),
        ("/etc/tarnbrook/tbcache.ini", "/etc/tarnbrook/tbcache.toml", "Where is the file?"),
        ("cache-size", "cache.size", "Which key sets it?"),
        ("CYP2C9", "CYP2C19", "Which enzyme metabolises it?"),
        ("her2", "HER2", "Which receptor does it target?"),
    ],
)
def test_identifiers_are_compared_exactly(answer: str, reference: str, question: str) -> None:
    assert _method(answer, reference, question) is None
    assert _veto(answer, reference, question) == "reference_identifier_missing"


@pytest.mark.parametrize(
    ("answer", "reference", "question"),
    [
        ("apt install tarnbrook-cache", "tarnbrook-cache", "What is the Debian package called?"),
        ("Set TBCACHE_CONFIG to the file's path.", "TBCACHE_CONFIG", "Which variable?"),
        ("snapshot_interval = 0", "Set snapshot_interval to 0", "How are snapshots disabled?"),
        ("Steam-kettles.", "steam-kettles", "What are they called?"),  # a kebab word's case is prose
        ("It is HER2-positive disease.", "HER2", "Which receptor?"),
    ],
)
def test_identifiers_written_exactly_pass(answer: str, reference: str, question: str) -> None:
    assert _veto(answer, reference, question) is None


def test_prose_is_not_an_identifier() -> None:
    assert identifiers("Allows restoring over a non-empty node") == []
    assert identifiers("TCP and UDP, e.g. on the well-known port") == []
    assert identifiers("Use `max_memory` or TB_CACHE_CONF with -n") == ["max_memory", "TB_CACHE_CONF", "-n"]
    assert _method("the copper hall", "The Copper Hall") == "normalised_match"


def test_an_identifier_the_question_states_or_a_long_reference_mentions_is_not_required() -> None:
    q = "What is the default value of max_memory?"
    assert _veto("2 GiB", "max_memory defaults to 2GiB", q) is None
    long = "Poor CYP2C19 metabolisers should get another drug than clopidogrel"
    assert (
        _veto("Another drug than clopidogrel, for poor metabolisers.", long, "Who needs another drug?")
        is None
    )


# --- 5. contrastive qualifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("TCP 7420", "UDP port 7420"),
        ("500 mg orally", "500 mg intravenous"),
        ("10 mg per day", "10 mg per dose"),
        ("10 mg weekly", "10 mg daily"),
        ("a maximum of 4 GiB", "a minimum of 4 GiB"),
        ("after 2 hours", "before 2 hours"),
        ("IPv6 only", "IPv4"),
    ],
)
def test_a_contrasting_qualifier_is_not_credited(answer: str, reference: str) -> None:
    assert _method(answer, reference) is None
    assert _veto(answer, reference) == "reference_qualifier_contradicted"


def test_a_qualifier_named_with_its_contrast_or_alone_passes() -> None:
    assert _method("Gossip runs over UDP on port 7420.", "UDP port 7420") == "numeric_equivalent"
    assert _veto("UDP 7420, not TCP", "UDP port 7420") is None
    assert _veto("twice daily", "2 doses a day") is None
    assert _veto("half an hour before meals", "30 minutes before meals") is None


# --- 6. dosages and lab values: the quantity guard --------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("0.5 g", "500 mg"),
        ("5,000 µg", "5 mg"),
        ("5000 mcg", "5 mg"),
        ("2000 mg", "2 g"),
        ("5 mg per kg of body weight", "5 mg/kg"),
        ("between 5 and 10 mg", "5–10 mg"),
        ("10-20 mg", "10 to 20 mg"),
        ("twice daily", "every 12 hours"),
        ("1500 mg", "1500 mg/day"),
        ("7.4 mmol/L", "7.4 mmol/l"),
        ("about 25 %", "25 percent"),
        ("1500 ms", "1.5 seconds"),  # a number a unit follows is no year
        ("three times a day", "every 8 hours"),
    ],
)
def test_the_quantity_guard_does_not_veto_right_dosages(answer: str, reference: str) -> None:
    assert _veto(answer, reference) is None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [("5 mg", "50 mg"), ("0.5 mg", "500 mg"), ("5 mg/kg", "0.5 mg/kg"), ("12 hours", "24 hours")],
)
def test_the_quantity_guard_still_vetoes_wrong_dosages(answer: str, reference: str) -> None:
    assert _veto(answer, reference) == "reference_quantity_missing"


@pytest.mark.parametrize(
    ("answer", "reference", "credited"),
    [
        ("0.5 g", "500 mg", True),
        ("5 mg per kg", "5 mg/kg", True),
        ("5000 µg/kg", "5 mg/kg", True),
        ("5 mg", "5 mg/kg", False),  # a dose per kilogram is not the dose
        ("0.1 g/L", "100 mg/dL", False),  # another denominator
    ],
)
def test_ratio_units_keep_their_denominator(answer: str, reference: str, credited: bool) -> None:
    assert (_method(answer, reference) == "numeric_equivalent") is credited


def test_the_new_guards_are_registered_with_their_docstrings() -> None:
    names = [g.name for g in GUARDS["en"]]
    for name in (
        "reference_version_missing",
        "reference_identifier_missing",
        "reference_qualifier_contradicted",
    ):
        guard = GUARDS["en"][names.index(name)]
        assert guard.reads_question and not guard.needs_question
        assert name in guard.doc and "sure" in guard.doc


# --- unit symbols, abbreviations, dates and codes, rate and dose contrasts (the second blind sets) ----


@pytest.mark.parametrize(
    ("text", "not_an_identifier"),
    [("512 KiB", "KiB"), ("2 g/dL", "dL"), ("8 vCPU", "vCPU"), ("0.38 nM", "nM"), ("16 GiB of RAM", "GiB")],
)
def test_unit_symbols_are_never_identifiers(text: str, not_an_identifier: str) -> None:
    assert not_an_identifier not in identifiers(text)
    assert "maxMemory" in identifiers("set maxMemory to 8")  # a code after a word is still one


@pytest.mark.parametrize(
    ("answer", "reference", "question"),
    [
        ("65536 bytes", "65,536 bytes (64 KiB)", "What is the default buffer size in bytes?"),
        ("At least 4 vCPUs.", "4 vCPU", "How many vCPUs does a worker need?"),
        ("30 g/L", "3 g/dL", "What is the threshold?"),
    ],
)
def test_a_quantity_in_other_units_is_not_vetoed_for_a_unit_symbol(
    answer: str, reference: str, question: str
) -> None:
    assert _veto(answer, reference, question) is None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("the activated partial thromboplastin time", "aPTT"),
        ("Cytochrome P450 2D6", "CYP2D6"),
        ("human epidermal growth factor receptor 2", "HER2"),
    ],
)
def test_an_abbreviation_written_out_is_not_vetoed(answer: str, reference: str) -> None:
    q = "Which one is it?"
    assert _veto(answer, reference, q) is None
    assert _veto("prothrombin time", "aPTT", q) == "reference_identifier_missing"
    assert _veto("Cytochrome P450 2C9", "CYP2D6", q) == "reference_identifier_missing"


def test_the_last_segment_of_a_dotted_identifier_the_question_prefixes_is_enough() -> None:
    q = "What is the default CompressionKind of a topic?"
    assert _veto("LZ4_FRAME", "CompressionKind.LZ4_FRAME", q) is None
    assert _veto("ZSTD_FAST", "CompressionKind.LZ4_FRAME", q) == "reference_identifier_missing"
    assert _veto("LZ4_FRAME", "CompressionKind.LZ4_FRAME", "What is the default?") is not None


def test_an_iso_date_is_a_date() -> None:
    q = "When does support end?"
    assert _method("31 March 2027", "2027-03-31", q) == "same_date"
    assert _veto("31 March 2027", "2027-03-31", q) is None
    assert _veto("30 April 2027", "2027-03-31", q) == "reference_quantity_missing"
    assert quantities("2027-03-31") == []


def test_digits_of_a_variant_or_allele_are_no_numbers() -> None:
    q = "Which variant lowers clearance?"
    assert _veto("CYP2C9*3", "CYP2C9 c.1075A>C (CYP2C9*3)", q) is None
    assert quantities("c.1075A>C") == []


def test_a_power_of_ten_is_its_value_or_the_guard_abstains() -> None:
    q = "Below what count is treatment withheld?"
    assert [x.value for x in quantities("150 × 10⁹/L")] == [150e9]
    assert [x.value for x in quantities("1.2 x 10^9")] == [1.2e9]
    assert _veto("150,000 per µL", "150 × 10⁹/L", q) is None  # a conversion the guard does not read
    assert _veto("100 × 10⁹/L", "150 × 10⁹/L", q) == "reference_quantity_missing"


def test_k_and_m_glued_to_digits_are_thousands_and_millions() -> None:
    q = "What is the default request limit?"
    assert [x.value for x in quantities("12k req/s")] == [12000.0]
    assert [x.value for x in quantities("2.5M rows")] == [2_500_000.0]
    assert _veto("12k req/s", "12,000 requests per second", q) is None
    assert [x.unit for x in quantities("5m")] == ["m"]  # lower-case m stays metres (or minutes)


def test_code_in_a_question_does_not_ask_for_a_name() -> None:
    answer, reference = (
        "A dry run: it lists the topics it would remove.",
        "Only reports what would be deleted",
    )
    assert _veto(answer, reference, "What does `tool topic delete <name>` do without --confirm?") is None
    assert _veto(answer, reference, "What does tool topic delete --name do without --confirm?") is None
    assert _veto(answer, reference, "What is the name of the deletion mode?") == "reference_name_missing"


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("2,500 requests per minute", "2,500 requests per second"),
        ("2,500 req/min", "2,500 requests per second"),
        ("50 tokens per hour", "50 tokens per minute"),
        ("20 mg twice daily", "20 mg orally once daily"),
        ("5 mg/kg once daily", "5 mg/kg orally three times daily"),
        ("20 mg b.i.d.", "20 mg once daily"),
    ],
)
def test_rate_denominators_and_dose_frequencies_are_contrasts(answer: str, reference: str) -> None:
    assert _method(answer, reference) is None
    assert _veto(answer, reference) == "reference_qualifier_contradicted"


def test_the_same_rate_or_frequency_written_otherwise_passes() -> None:
    assert _veto("2.5k req/s", "2,500 requests per second") is None
    assert _veto("20 mg twice a day", "20 mg twice daily") is None
    assert _veto("20 mg 2 times a day", "20 mg twice daily") is None


@pytest.mark.parametrize(
    ("answer", "reference", "credited"),
    [
        ("0.25 µg/mL", "250 ng/mL", True),
        ("250 µg/mL", "250 ng/mL", False),
        ("15 g/L", "1.5 g/dL", True),
        ("250 pM", "0.25 nM", True),
        ("0.25 µM", "0.25 nM", False),
        ("5.5 mmol/L", "5.5 mM", True),
    ],
)
def test_ratio_units_convert_part_by_part(answer: str, reference: str, credited: bool) -> None:
    assert (_method(answer, reference) == "numeric_equivalent") is credited
    if not credited:
        assert _veto(answer, reference) == "reference_quantity_missing"


def test_a_bare_count_beside_measured_detail_is_credited() -> None:
    q = "After how many failed probes is a node removed?"
    assert (
        _method("Four failed probes, that is 20 s at the default interval.", "4", q) == "numeric_equivalent"
    )
    assert _method("Five failed probes, that is 20 s.", "4", q) is None
    assert _method("4 probes or 5 retries", "4", q) is None
