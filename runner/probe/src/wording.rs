//! This project's own entities and sentence templates for the generator.
//!
//! `{v}` is the value a sentence states, `{s}` the subject of a third-party link and
//! `{old}` the value being contradicted. Entities are fictional where they are
//! organisations and real where they are places, with time zones true to the cities.

use crate::record::Domain;

/// One coherent four-link chain of values: root, hop 2, hop 3, hop 4.
pub type ChainValues = [&'static str; 4];

pub struct DomainWording {
    /// Root sentence, starting with a lower-case word so a hedge can precede it.
    pub root: &'static str,
    /// Third-party link sentences for hops 2, 3, 4.
    pub links: [&'static str; 3],
    /// Question at hops 1..=4.
    pub questions: [&'static str; 4],
    /// Chains of values; items take one each by a balanced rule (see the generator).
    pub chains: [ChainValues; 4],
    /// Replacement roots named by asserted contradictions, one per chain.
    pub replacements: [&'static str; 4],
    /// Asserted update of the root.
    pub root_update: &'static str,
    /// False where the update is a withdrawal that names no new value (training), so
    /// the generator records a retraction instead of a replacing fact.
    pub root_update_names_replacement: bool,
    pub root_correction: &'static str,
    /// Derived update and correction of the conclusion at hops 2, 3, 4.
    pub derived_update: [&'static str; 3],
    pub derived_correction: [&'static str; 3],
    /// PIT sentences (first fact, update, correction "all along"); `{date}` is a month.
    pub pit_first: &'static str,
    pub pit_update: &'static str,
    pub pit_correction: &'static str,
}

const EMPLOYMENT: DomainWording = DomainWording {
    root: "my employer is {v}.",
    links: [
        "{s} has its offices in {v}.",
        "{s} runs on {v} time.",
        "{s} time {v}.",
    ],
    questions: [
        "Who is my employer?",
        "In which city is my workplace?",
        "Which time zone are my working hours on?",
        "Do my working hours shift for daylight saving time?",
    ],
    chains: [
        [
            "Halvorsen Robotics",
            "Chicago",
            "Central",
            "observes daylight saving time",
        ],
        [
            "Marigold Analytics",
            "Honolulu",
            "Hawaii",
            "stays on standard time all year",
        ],
        [
            "Copperleaf Foods",
            "Boston",
            "Eastern",
            "observes daylight saving time",
        ],
        [
            "Tessellate Freight",
            "Tokyo",
            "Japan",
            "stays on standard time all year",
        ],
    ],
    replacements: [
        "Sable & Finch",
        "Northgate Outfitters",
        "Bellwether Labs",
        "Riverstone Health",
    ],
    root_update: "News from me: I changed jobs. I no longer work for {old}; {v} hired me.",
    root_update_names_replacement: true,
    root_correction:
        "I got that wrong before: I have never worked for {old}. My employer has always been {v}.",
    derived_update: [
        "My team relocated, so I now work out of {v}.",
        "These days my working hours are on {v} time.",
        "From this month on, my working hours follow a schedule that {v}.",
    ],
    derived_correction: [
        "I had that wrong: my workplace has always been in {v}, never in {old}.",
        "I misstated it: my working hours have always been on {v} time, not {old} time.",
        "I was wrong before: my work schedule {v}, and it always has.",
    ],
    pit_first: "I started working for {v} in {date}.",
    pit_update: "Job news: I left {old} and have worked for {v} since {date}.",
    pit_correction:
        "I need to fix my record: I never worked for {old}. I have been with {v} since {date}.",
};

const RESIDENCE: DomainWording = DomainWording {
    root: "my home is in {v}.",
    links: [
        "{s} gets its electricity from {v}.",
        "{s} bills its customers through {v}.",
        "{s} is run by {v}.",
    ],
    questions: [
        "Which city is my home in?",
        "Which utility provides my electricity?",
        "Which website do I use to pay my electric bill?",
        "Which firm runs the site where I pay my electric bill?",
    ],
    chains: [
        [
            "Savannah",
            "Coastal Plains Power",
            "VoltPay",
            "Meridian Holdings",
        ],
        ["Spokane", "Inland Hydro", "KiloPortal", "Ashcombe Group"],
        [
            "Albany",
            "Hudson Valley Electric",
            "PowerDesk",
            "Larchmont Partners",
        ],
        [
            "Boise",
            "Sawtooth Energy",
            "MeterMate",
            "Vantage Ridge Capital",
        ],
    ],
    replacements: ["Duluth", "Fresno", "Asheville", "Tulsa"],
    root_update: "I moved house: I've left {old}, and my home is in {v} now.",
    root_update_names_replacement: true,
    root_correction:
        "Scratch what I said earlier: I never lived in {old}. My home has always been in {v}.",
    derived_update: [
        "I've switched electricity suppliers; it is {v} now.",
        "I now pay my electric bill on {v} instead.",
        "The site where I pay my electric bill changed hands; {v} runs it now.",
    ],
    derived_correction: [
        "I had it wrong: my electricity has always come from {v}, not {old}.",
        "I misremembered: I have always paid my electric bill on {v}, never on {old}.",
        "I was mistaken: the site I pay my electric bill on has always been run by {v}, not {old}.",
    ],
    pit_first: "I moved into my home in {v} in {date}.",
    pit_update: "I relocated: I left {old} and my home has been in {v} since {date}.",
    pit_correction:
        "Let me correct something: I never lived in {old}. My home has been in {v} since {date}.",
};

const TRAINING: DomainWording = DomainWording {
    root: "my goal race is the {v}.",
    links: [
        "Entrants of the {s} get the {v} schedule.",
        "The {s} schedule puts the long run on {v}.",
        "With long runs on {s}, {v} has to stay clear of meetings.",
    ],
    questions: [
        "Which race am I preparing for?",
        "Which training schedule do I follow?",
        "On which day do I do my long runs?",
        "Which slot in my week should be kept free of meetings?",
    ],
    chains: [
        [
            "Ridgeline Marathon",
            "Higdon Intermediate 1",
            "Sundays",
            "Sunday morning",
        ],
        [
            "Prairie Half Marathon",
            "Tempo Builder 16/45",
            "Saturdays",
            "Saturday morning",
        ],
        [
            "Canyon Trail 50K",
            "Galloway Run-Walk",
            "Thursdays",
            "Thursday evening",
        ],
        [
            "Riverfront Ten Miler",
            "Base Miles 12",
            "Wednesdays",
            "Wednesday morning",
        ],
    ],
    replacements: [
        "Summit Relay",
        "Bayside 15K",
        "Lakeshore Marathon",
        "Foothills Half",
    ],
    root_update: "I've pulled out of the {old}, and I'm not entered in any other race right now.",
    root_update_names_replacement: false,
    root_correction:
        "I mixed things up: I was never entered in the {old}. My goal race has always been the {v}.",
    derived_update: [
        "My coach has moved me onto the {v} schedule.",
        "My long runs have moved to {v}.",
        "From now on, {v} is the slot to keep free of meetings.",
    ],
    derived_correction: [
        "I had that wrong: I have always followed the {v} schedule, never {old}.",
        "I misspoke: my long runs have always been on {v}, not {old}.",
        "I got that wrong: the slot to keep free of meetings has always been {v}, not {old}.",
    ],
    // Training is not part of the point-in-time extension.
    pit_first: "",
    pit_update: "",
    pit_correction: "",
};

pub fn wording(domain: Domain) -> &'static DomainWording {
    match domain {
        Domain::Employment => &EMPLOYMENT,
        Domain::Residence => &RESIDENCE,
        Domain::Training => &TRAINING,
    }
}

/// Hedges put before a lower-case root sentence.
pub const HEDGES: [&str; 3] = [
    "If memory serves, ",
    "As far as I recall, ",
    "I'm fairly sure ",
];

/// Off-topic filler sessions; they carry no facts.
pub const FILLERS: [&str; 6] = [
    "Can you suggest a good stretch after sitting at a desk all day?",
    "What's an easy way to keep basil alive indoors?",
    "How long should green tea steep?",
    "Any ideas for a rainy afternoon with two kids?",
    "What's a simple trick for remembering people's names?",
    "How do I stop my glasses fogging up in the cold?",
];

/// Fill a template: `{v}` value, `{s}` subject, `{old}` contradicted value, `{date}` month.
pub fn fill(template: &str, v: &str, s: &str, old: &str, date: &str) -> String {
    template
        .replace("{v}", v)
        .replace("{s}", s)
        .replace("{old}", old)
        .replace("{date}", date)
}

/// Upper-case the first letter of a sentence.
pub fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
