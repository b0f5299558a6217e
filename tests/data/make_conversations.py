"""Generate tests/data/conversations.json and tests/data/long_conversations.json: the
conversational-memory evaluation sets (`SHORT` and `LONG` shapes).

Deterministic (fixed seeds, no clock, no network): `python tests/data/make_conversations.py [short|long]`
rewrites the files byte for byte. See tests/data/README.md for the format and the question kinds.

In the short set each conversation is between 2-3 people over 4-6 dated sessions about a week
apart; in the long one between 3 people over 18-24 sessions, where news also comes up again later
(`FOLLOW_UPS`). People share
news ("events": hobbies, trips, pets, jobs, purchases), change preferences (a "before" turn in an
early session, an "after" turn in a later one), make plans and later report how they went (with
photos described in brackets), and chat around them (reactions and small talk that carry no
evidence). Some events are told by two people of the same conversation in different words: a
question about one of them is an adversarial near-miss for the other's turn.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

SEED = 1207
LONG_SEED = 2024


@dataclass(frozen=True)
class Shape:
    """How big the conversations of one set are (each range inclusive)."""

    conversations: int
    sessions: tuple[int, int]
    #: Days between two sessions.
    gap: tuple[int, int]
    #: News events per conversation, and how many of them a second person tells too.
    events: int
    shared: int
    changes: int
    plans: int
    #: Turns per session before the cap (small talk fills up to it).
    turns: tuple[int, int]
    #: The most turns of one conversation (small talk beyond it is dropped).
    max_turns: int
    #: Questions per conversation whose answer is spread over 2-4 news turns of different sessions.
    multi_entity: int
    #: Aggregate questions per conversation at most: one topic, the news of one or more people about it.
    aggregate: int
    #: Later mentions of a piece of news by its teller (`FOLLOW_UPS`), per news turn at most.
    follow_ups: int
    #: "alternate": odd-numbered conversations are the tuning half; "held-out": every one is held out.
    split: str


#: tests/data/conversations.json: 16 conversations of 42-58 turns, tuning and held-out halves.
SHORT = Shape(
    conversations=16,
    sessions=(4, 6),
    gap=(6, 9),
    events=8,
    shared=2,
    changes=2,
    plans=2,
    turns=(8, 11),
    max_turns=60,
    multi_entity=8,
    aggregate=8,
    follow_ups=0,
    split="alternate",
)
#: tests/data/long_conversations.json: 6 conversations of about 300 turns in 18-24 sessions, where the
#: news comes up again later (`FOLLOW_UPS`), every one held out (nothing is tuned on it).
LONG = Shape(
    conversations=6,
    sessions=(18, 24),
    gap=(3, 8),
    events=20,
    shared=4,
    changes=4,
    plans=4,
    turns=(13, 17),
    max_turns=480,
    multi_entity=12,
    aggregate=12,
    follow_ups=2,
    split="held-out",
)
SETS = {"short": (SHORT, SEED, "conversations.json"), "long": (LONG, LONG_SEED, "long_conversations.json")}

NAMES = [
    "Maya",
    "Daniel",
    "Priya",
    "Tomás",
    "Ingrid",
    "Kwame",
    "Lena",
    "Hiroshi",
    "Sofia",
    "Omar",
    "Grace",
    "Ravi",
    "Elena",
    "Jonas",
    "Amara",
    "Felix",
    "Nadia",
    "Marco",
    "Yuki",
    "Chloe",
]

# An event: what the teller says (variants, first person), a past-tense clause for temporal questions,
# direct questions (share words with the turn) and paraphrases (no content word in common).
EVENTS: list[dict] = [
    dict(
        id="pottery",
        say=[
            "I signed up for a pottery class on Thursday evenings.",
            "Started a pottery course, Thursdays after work. My hands are covered in clay!",
        ],
        past="sign up for the pottery class",
        direct=["What class did {p} sign up for?", "Which evening course is {p} taking on Thursdays?"],
        para=["Which hobby of shaping things on a spinning wheel did {p} take on?"],
    ),
    dict(
        id="puppy",
        say=[
            "We adopted a puppy from the shelter, a beagle called Biscuit. [photo: a small beagle"
            " asleep on a blue rug]",
            "Big news, we brought home a beagle puppy named Biscuit from the rescue!",
        ],
        past="adopt the beagle",
        direct=["What is the name of {p}'s puppy?", "What breed is the puppy {p} adopted?"],
        para=["Which four-legged companion joined {p}'s household?"],
    ),
    dict(
        id="marathon",
        say=[
            "I ran the Rotterdam half marathon in 1 hour 52 minutes.",
            "Finished the Rotterdam half marathon! 1:52, my legs are jelly. [photo: a finisher medal"
            " on a wooden table]",
        ],
        past="run the Rotterdam half marathon",
        direct=["How long did {p} take to run the Rotterdam half marathon?", "Which half marathon did {p} finish?"],
        para=["What long-distance race did {p} complete, and at what pace?"],
    ),
    dict(
        id="promotion",
        say=[
            "I got promoted to team lead at the bank.",
            "They made me team lead at the bank this week, still sinking in.",
        ],
        past="get promoted to team lead",
        direct=["What promotion did {p} get at the bank?", "Where was {p} made team lead?"],
        para=["Which step up the career ladder did {p} recently take?"],
    ),
    dict(
        id="guitar",
        say=[
            "I bought a second-hand acoustic guitar and I'm learning chords from videos.",
            "Picked up a used acoustic guitar, practising chords every night with online lessons.",
        ],
        past="buy the acoustic guitar",
        direct=["What instrument did {p} buy?", "How is {p} learning guitar chords?"],
        para=["Which musical thing with six strings is {p} teaching themself to play?"],
    ),
    dict(
        id="garden",
        say=[
            "I planted tomatoes, basil and peppers in the allotment.",
            "Spent the whole Sunday at the allotment putting in tomatoes, basil and peppers. [photo:"
            " rows of seedlings in dark soil]",
        ],
        past="plant tomatoes in the allotment",
        direct=["What did {p} plant in the allotment?", "Which vegetables did {p} put in?"],
        para=["What is {p} growing on their plot of land outdoors?"],
    ),
    dict(
        id="book",
        say=[
            "I just finished reading The Left Hand of Darkness, loved it.",
            "Finally finished The Left Hand of Darkness. Le Guin is brilliant.",
        ],
        past="finish The Left Hand of Darkness",
        direct=["Which book did {p} finish reading?", "What did {p} think of The Left Hand of Darkness?"],
        para=["Which science fiction novel by an American woman author did {p} complete?"],
    ),
    dict(
        id="moving",
        say=[
            "We're moving to a flat in Utrecht at the end of the month.",
            "We signed the lease on a flat in Utrecht, moving in four weeks.",
        ],
        past="sign the lease in Utrecht",
        direct=["Which city is {p} moving to?", "Where is {p}'s new flat?"],
        para=["To which Dutch town will {p} relocate their home?"],
    ),
    dict(
        id="cooking",
        say=[
            "I've been baking sourdough every weekend, the starter is called Doug.",
            "My sourdough starter, Doug, is finally strong enough, baked three loaves. [photo: a"
            " crusty round loaf on a cooling rack]",
        ],
        past="bake the first sourdough loaves",
        direct=["What is {p}'s sourdough starter called?", "What has {p} been baking on weekends?"],
        para=["What kind of bread made with a fermented culture does {p} make?"],
    ),
    dict(
        id="surgery",
        say=[
            "My knee surgery went well, I'm on crutches for three weeks.",
            "Had the operation on my knee, it went fine, but crutches for three weeks.",
        ],
        past="have the knee surgery",
        direct=["How did {p}'s knee surgery go?", "How long will {p} be on crutches?"],
        para=["What medical procedure on a leg joint did {p} go through?"],
    ),
    dict(
        id="volunteer",
        say=[
            "I started volunteering at the food bank on Saturday mornings.",
            "Saturday mornings I now help out at the food bank, sorting donations.",
        ],
        past="start volunteering at the food bank",
        direct=["Where does {p} volunteer on Saturday mornings?", "What does {p} do at the food bank?"],
        para=["Which charity work helping hungry families does {p} do at the weekend?"],
    ),
    dict(
        id="car",
        say=[
            "We finally sold the old Volvo and bought an electric Kia.",
            "Traded the Volvo in for an electric Kia, charging it at home overnight. [photo: a white"
            " hatchback plugged into a wall charger]",
        ],
        past="buy the electric Kia",
        direct=["Which car did {p} buy?", "What happened to {p}'s old Volvo?"],
        para=["What battery-powered vehicle does {p} drive now?"],
    ),
    dict(
        id="language",
        say=[
            "I'm taking Japanese lessons twice a week before our trip.",
            "Two Japanese lessons a week now, hiragana is going ok, kanji not so much.",
        ],
        past="start Japanese lessons",
        direct=["Which language is {p} taking lessons in?", "How often does {p} have Japanese lessons?"],
        para=["Which Asian tongue is {p} studying?"],
    ),
    dict(
        id="concert",
        say=[
            "We saw Arctic Monkeys at the Ziggo Dome, absolutely loud. [photo: a dark arena lit by"
            " purple stage lights]",
            "Went to the Arctic Monkeys gig at the Ziggo Dome last night, my ears are still ringing.",
        ],
        past="see Arctic Monkeys at the Ziggo Dome",
        direct=["Which band did {p} see at the Ziggo Dome?", "Where did {p} see Arctic Monkeys?"],
        para=["Which rock group's live show did {p} attend?"],
    ),
    dict(
        id="wedding",
        say=[
            "My sister is getting married in Porto in June and I'm the maid of honour.",
            "Sister's wedding is in Porto in June, I have to give a speech as maid of honour.",
        ],
        past="hear about the Porto wedding",
        direct=["Where is {p}'s sister getting married?", "What role does {p} have at the wedding in Porto?"],
        para=["Whose marriage ceremony abroad will {p} attend, and in what role?"],
    ),
    dict(
        id="climbing",
        say=[
            "I joined the bouldering gym near the station, climbed my first V3.",
            "Bouldering is my new thing, the gym by the station, sent a V3 today!",
        ],
        past="climb the first V3",
        direct=["Which gym did {p} join?", "What grade did {p} climb at the bouldering gym?"],
        para=["What indoor wall sport has {p} taken up?"],
    ),
    dict(
        id="newjob",
        say=[
            "I accepted an offer from a solar energy startup, starting in May.",
            "I'm leaving the agency, I said yes to a solar energy startup, first day in May.",
        ],
        past="accept the offer from the solar startup",
        direct=[
            "What kind of startup did {p} accept an offer from?",
            "When does {p} start at the solar energy startup?",
        ],
        para=["Which renewable power company will {p} work for next?"],
    ),
    dict(
        id="camping",
        say=[
            "We went camping in the Ardennes, it rained the whole weekend. [photo: a soaked green"
            " tent among pine trees]",
            "Camping trip in the Ardennes was a washout, rain from Friday to Sunday.",
        ],
        past="go camping in the Ardennes",
        direct=["Where did {p} go camping?", "How was the weather on {p}'s camping trip?"],
        para=["Which soggy nights under canvas in a Belgian forest did {p} have?"],
    ),
    dict(
        id="chess",
        say=[
            "I've been playing chess online every evening, my rating is up to 1400.",
            "Chess every night now, reached 1400 rating online.",
        ],
        past="reach a 1400 chess rating",
        direct=["What is {p}'s online chess rating?", "What game does {p} play online every evening?"],
        para=["Which board game with kings and pawns does {p} play on the internet?"],
    ),
    dict(
        id="allergy",
        say=[
            "Turns out I'm allergic to cats, the doctor confirmed it with a test.",
            "The allergy test came back, I'm allergic to cats, so no kitten for us.",
        ],
        past="get the cat allergy test result",
        direct=["What is {p} allergic to?", "What did {p}'s allergy test show?"],
        para=["Which household pet makes {p} sneeze and itch?"],
    ),
    dict(
        id="exam",
        say=[
            "I passed my driving test on the second try!",
            "Second attempt and I passed the driving test, finally a licence.",
        ],
        past="pass the driving test",
        direct=["Which test did {p} pass?", "How many tries did {p} need for the driving test?"],
        para=["When did {p} become allowed to get behind the wheel legally?"],
    ),
    dict(
        id="renovation",
        say=[
            "We're redoing the kitchen, new oak cabinets and a green tiled wall.",
            "Kitchen renovation has begun, oak cabinets going in, tiles will be green. [photo: a"
            " half-built kitchen with bare pipes]",
        ],
        past="start the kitchen renovation",
        direct=["What is {p} renovating?", "What colour tiles is {p} putting in the kitchen?"],
        para=["Which room of the house is {p} rebuilding?"],
    ),
    dict(
        id="swim",
        say=[
            "I swim at the outdoor pool at 7 every morning before work.",
            "Morning swims at the outdoor pool, 7 am sharp, before heading to work.",
        ],
        past="start the morning swims",
        direct=["When does {p} go swimming?", "Where does {p} swim before work?"],
        para=["Which early exercise routine in water does {p} keep?"],
    ),
    dict(
        id="podcast",
        say=[
            "I launched a podcast about urban cycling, first episode is out.",
            "First episode of my cycling podcast is live, it's about bikes in cities.",
        ],
        past="launch the cycling podcast",
        direct=["What is {p}'s podcast about?", "Did {p} launch a podcast?"],
        para=["Which audio show on bicycle commuting in towns did {p} start?"],
    ),
    dict(
        id="baby",
        say=[
            "My brother and his wife had a baby girl, her name is Ada.",
            "I'm an aunt now! Baby Ada was born on Tuesday. [photo: a newborn wrapped in a yellow blanket]",
        ],
        past="hear that baby Ada was born",
        direct=["What is the name of {p}'s new niece?", "Who had a baby girl in {p}'s family?"],
        para=["Which infant relative joined {p}'s family?"],
    ),
    dict(
        id="scuba",
        say=[
            "I got my scuba diving certificate in Malta.",
            "Finished the open water diving course in Malta, certified now!",
        ],
        past="get the diving certificate in Malta",
        direct=["Where did {p} get a scuba diving certificate?", "What certificate did {p} get in Malta?"],
        para=["Which underwater qualification did {p} earn on a Mediterranean island?"],
    ),
]

# Preferences that change: before (early session) and after (later session).
CHANGES: list[dict] = [
    dict(
        id="coffee",
        before=["I can't function without three espressos a day.", "Coffee is life, three espressos before noon."],
        after=[
            "I quit coffee completely, it's green tea for me now.",
            "No more espresso, I switched to green tea and sleep so much better.",
        ],
        q=["What did {p} drink before and what does {p} drink now?", "How have {p}'s drinking habits changed?"],
        para="Which caffeinated habit did {p} give up, and for what?",
    ),
    dict(
        id="diet",
        before=["I love a good steak, barbecue every Friday.", "Nothing beats steak on the grill on Fridays."],
        after=["I've gone vegetarian, no meat since last month.", "I stopped eating meat, fully vegetarian now."],
        q=["What was {p}'s diet before and what is it now?", "Did {p} change what they eat?"],
        para="How did {p}'s relationship with animal products shift?",
    ),
    dict(
        id="commute",
        before=[
            "I drive to the office every day, forty minutes each way.",
            "The daily drive to work takes me forty minutes.",
        ],
        after=["I sold the car and cycle to the office now.", "Cycling to work these days, gave up driving."],
        q=["How did {p} commute before and how now?", "What changed about how {p} gets to the office?"],
        para="Which means of getting to the workplace did {p} swap for another?",
    ),
    dict(
        id="music",
        before=["I only listen to jazz, mostly Coltrane.", "Jazz all day, Coltrane on repeat."],
        after=["Lately I'm obsessed with k-pop, who knew.", "I've moved on from jazz, it's all k-pop now."],
        q=["Which music did {p} listen to before, and which now?", "How did {p}'s taste in music change?"],
        para="Which genres of songs has {p} gone between?",
    ),
    dict(
        id="sport",
        before=["Tennis is my sport, I play every Tuesday.", "Tuesday tennis with my club is sacred."],
        after=["I quit tennis and joined a rowing club.", "Rowing club now, tennis is behind me."],
        q=["Which sport did {p} play before and which now?", "What sport did {p} switch to?"],
        para="Which racket game did {p} abandon for a water-based one?",
    ),
    dict(
        id="city",
        before=["I never want to leave Berlin, I love this city.", "Berlin is home, I can't imagine living elsewhere."],
        after=[
            "Plot twist, I'm moving from Berlin to Lisbon for good.",
            "I decided to leave Berlin and move to Lisbon.",
        ],
        q=["Where did {p} live before and where is {p} moving?", "Why is {p} leaving Berlin, and for where?"],
        para="Between which two European capitals is {p} relocating?",
    ),
    dict(
        id="work",
        before=[
            "I love working from the office, the team energy is great.",
            "Office every day for me, I like being around people.",
        ],
        after=[
            "I switched to fully remote, working from home full time.",
            "Going fully remote now, the office is too far.",
        ],
        q=["Where did {p} prefer to work before, and where now?", "How did {p}'s work setup change?"],
        para="Did {p} go from a shared workplace to the kitchen table?",
    ),
    dict(
        id="phone",
        before=["I'm an iPhone person, never switching.", "iPhone forever, I tried Android once and hated it."],
        after=["I switched to a Pixel, Android grew on me.", "Got a Pixel, turns out I like Android now."],
        q=["Which phone did {p} use before, and which now?", "What phone did {p} switch to?"],
        para="Which mobile device maker did {p} abandon?",
    ),
]

# Plans (early session) and how they went (later session).
PLANS: list[dict] = [
    dict(
        id="kyoto",
        plan=[
            "I'm planning a trip to Kyoto in the autumn to see the temples.",
            "Booking flights to Kyoto for the autumn, temples and gardens.",
        ],
        done=[
            "Back from Kyoto! The temples were stunning. [photo: a red torii gate path in Kyoto]",
            "Kyoto was amazing, walked through a thousand torii gates. [photo: a tea house by a river]",
        ],
        q=["What trip did {p} plan and how did it go?", "What did {p} see in Kyoto?"],
        para="Where in Japan did {p} travel, and was it worth it?",
    ),
    dict(
        id="bakery",
        plan=[
            "I want to open a small bakery, looking at a shop on the corner.",
            "Dream plan: my own little bakery, there's a corner shop for rent.",
        ],
        done=[
            "The bakery opened on Saturday, we sold out by noon! [photo: a queue outside a shop with a striped awning]",
            "We opened the bakery, sold out of croissants by noon on day one.",
        ],
        q=["What business did {p} plan and how did the opening go?", "Did {p}'s bakery open?"],
        para="How did {p}'s pastry business launch turn out?",
    ),
    dict(
        id="thesis",
        plan=[
            "My thesis defence is scheduled, I'm terrified.",
            "Preparing for my thesis defence, the committee is tough.",
        ],
        done=[
            "I defended my thesis, I'm officially a doctor!",
            "Thesis defence done and passed, Dr. now. [photo: a diploma and a bunch of tulips]",
        ],
        q=["How did {p}'s thesis defence go?", "Did {p} pass the thesis defence?"],
        para="Did {p} earn a doctorate after the academic examination?",
    ),
    dict(
        id="hike",
        plan=[
            "I'm going to hike the West Highland Way next month.",
            "Planning to walk the West Highland Way, 150 km in a week.",
        ],
        done=[
            "Finished the West Highland Way, blisters everywhere. [photo: a foggy loch with mountains behind]",
            "Walked the whole West Highland Way, my feet hate me.",
        ],
        q=["Which hike did {p} plan and finish?", "How did the West Highland Way go for {p}?"],
        para="Which long trek through Scotland did {p} complete?",
    ),
    dict(
        id="party",
        plan=[
            "I'm throwing a surprise party for my partner's fortieth.",
            "Secretly organising a 40th birthday party for my partner.",
        ],
        done=[
            "The surprise party worked, they had no idea! [photo: a cake with a big 40 candle]",
            "Pulled off the surprise 40th, total shock on their face.",
        ],
        q=["What party did {p} organise and how did it go?", "Was the surprise party a success for {p}?"],
        para="Did {p}'s secret celebration for a spouse turning forty succeed?",
    ),
    dict(
        id="halfiron",
        plan=[
            "I registered for a triathlon in September, training starts now.",
            "Signed up for my first triathlon, it's in September.",
        ],
        done=[
            "Crossed the triathlon finish line, swim bike run all done. [photo: a wetsuit drying on a balcony]",
            "Triathlon completed, the bike leg nearly killed me.",
        ],
        q=["Which race did {p} register for and finish?", "How did {p}'s triathlon go?"],
        para="Did {p} get through the three-discipline endurance contest?",
    ),
]

# Later mentions of a piece of news by its teller: about it, but carrying none of its details (no
# name, place, breed, grade or date that a question about it asks for). Not evidence of any question.
FOLLOW_UPS: dict[str, list[str]] = {
    "pottery": [
        "Class again tonight, I'm slowly getting the hang of it.",
        "The Thursday session ran late again, loved it.",
    ],
    "puppy": ["The little one chewed through my shoelaces again.", "Walks at 6 am every day now, the dog insists."],
    "marathon": ["My legs have finally recovered from the race.", "Already looking at another race for next spring."],
    "promotion": ["The new role means a lot more meetings.", "Still getting used to managing people at work."],
    "guitar": ["My fingertips hurt from practising every night.", "I can almost play a whole song now."],
    "garden": ["The slugs are winning at the plot this year.", "Watering everything at the plot takes an hour."],
    "book": ["I keep thinking about that novel I finished.", "Looking for my next read after that last one."],
    "moving": [
        "Boxes everywhere, the move is taking over my life.",
        "Still haven't unpacked the kitchen after the move.",
    ],
    "cooking": ["The starter needed feeding twice today.", "Another loaf this weekend, the crust was better."],
    "surgery": ["Physio again today, slow going.", "Climbed the stairs without help for the first time."],
    "volunteer": ["Another early Saturday sorting boxes.", "Met some lovely people on my shift this week."],
    "car": ["Charging stations are easy to find around here.", "I barely pay anything for fuel anymore."],
    "language": ["My teacher gave us so much homework.", "I can finally read a few signs in the script."],
    "concert": [
        "My ears were ringing for two days after the gig.",
        "I still have the songs from that night in my head.",
    ],
    "wedding": ["Started writing my speech for the big day.", "Dress fittings are next month, so much to plan."],
    "climbing": ["My forearms are sore after the gym again.", "Finally got the problem I was stuck on."],
    "newjob": ["First weeks at the new place have been intense.", "My new colleagues are really friendly."],
    "camping": ["Still drying out the tent from that trip.", "Next time I'm checking the forecast first."],
    "chess": ["Lost three games in a row last night, tilted.", "Studying openings instead of sleeping."],
    "allergy": ["Antihistamines are my new best friend.", "Visited a friend with pets and regretted it."],
    "exam": ["Drove on the motorway alone for the first time.", "Borrowed my dad's car for the weekend."],
    "renovation": ["The dust from the works gets everywhere.", "The builders found another problem behind the wall."],
    "swim": ["The water was freezing this morning but I went anyway.", "Twenty lengths today, new record."],
    "podcast": ["Recorded another episode last night.", "We got our first listener email!"],
    "baby": [
        "Visited my sister and the little one this weekend.",
        "Sleepless nights for the new parents, they look tired.",
    ],
    "scuba": ["Already dreaming about my next dive.", "Bought my own mask and fins finally."],
}

REACTIONS = [
    "That's amazing, congrats!",
    "Oh wow, I had no idea.",
    "Haha, classic you.",
    "How are you feeling about it?",
    "You have to send me more pictures.",
    "That sounds exhausting, honestly.",
    "I'm so jealous right now.",
    "Wait, really? Tell me everything.",
    "Good for you, seriously.",
    "Ha, I knew you'd do it eventually.",
    "Was it as good as you hoped?",
    "Not sure I could do that myself.",
    "Let me know if you need a hand.",
    "Aww, that's lovely.",
    "Sounds like a big change.",
    "We should celebrate next time we meet.",
]
SMALLTALK = [
    "Hey! How was your week?",
    "Sorry I went quiet, work has been hectic.",
    "Morning! Coffee in hand?",
    "Long day, but I'm finally home.",
    "Did you watch the match on Sunday?",
    "The weather has been awful lately.",
    "I'm just back from the supermarket, the queues were insane.",
    "Anyway, what's new with you?",
    "Can't believe it's already this time of year.",
    "My neighbour is drilling again, send help.",
    "Okay I have to run, talk soon!",
    "Speak soon, have a good one.",
    "Good night, chat tomorrow?",
    "Did I tell you about my cousin's new flat? Never mind, another time.",
    "I need a holiday, seriously.",
    "Traffic was a nightmare this morning.",
    "I'm cooking pasta again, very creative I know.",
    "Miss our Friday drinks, we should restart them.",
]
TIME_PREFIX = {"yesterday": 1, "last Saturday": None, "two days ago": 2, "on Monday": None}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def human(d: date) -> str:
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def weekday_before(d: date, weekday: int) -> date:
    back = (d.weekday() - weekday) % 7 or 7
    return d - timedelta(days=back)


def build(seed: int = SEED, shape: Shape = SHORT) -> dict:
    rng = random.Random(seed)
    conversations, questions = [], []
    qn = 0
    deferred: list[tuple] = []  # per conversation: what aggregate() needs, asked after every other question

    def ask(conv: str, kind: str, text: str, evidence: list[str]) -> None:
        nonlocal qn
        qn += 1
        questions.append(
            {"id": f"q{qn:04d}", "conversation": conv, "kind": kind, "question": text, "evidence": evidence}
        )

    for c in range(shape.conversations):
        cid = f"c{c + 1:02d}"
        people = rng.sample(NAMES, 3 if c % 3 == 0 or shape is not SHORT else 2)
        n_sessions = rng.randint(*shape.sessions)
        start = date(2026, 1, 5) + timedelta(days=rng.randint(0, 200))
        dates = [start]
        for _ in range(n_sessions - 1):
            dates.append(dates[-1] + timedelta(days=rng.randint(*shape.gap)))
        events = rng.sample(EVENTS, shape.events)
        # Two events are told by two people: near-miss material.
        told: list[tuple[str, dict, int]] = []  # (person, event, variant)
        for i, ev in enumerate(events):
            told.append((people[i % len(people)], ev, rng.randrange(2)))
        for ev in events[: shape.shared]:
            owner = next(p for p, e, _ in told if e is ev)
            other = rng.choice([p for p in people if p != owner])
            variant = 1 - next(v for _, e, v in told if e is ev)
            told.append((other, ev, variant))
        change = rng.sample(CHANGES, shape.changes)
        plan = rng.sample(PLANS, shape.plans)
        # Schedule: each item -> (session index, speaker, text, tag)
        items: list[tuple[int, str, str, tuple]] = []
        rng.shuffle(told)
        for person, ev, variant in told:
            s = rng.randrange(n_sessions)
            text = ev["say"][variant]
            rel = None
            if text.startswith(("I ", "We ")) and rng.random() < 0.5:
                prefix = rng.choice(list(TIME_PREFIX))
                rel = prefix
                text = f"{prefix[0].upper() + prefix[1:]} {text if text.startswith('I ') else 'we' + text[2:]}"
            items.append((s, person, text, ("event", ev["id"], person, rel)))
            if shape.follow_ups and s < n_sessions - 1:
                for line in rng.sample(FOLLOW_UPS[ev["id"]], rng.randint(0, shape.follow_ups)):
                    items.append((rng.randrange(s + 1, n_sessions), person, line, None))
        for ch in change:
            person = rng.choice(people)
            s1 = rng.randrange(0, n_sessions // 2)
            s2 = rng.randrange(n_sessions // 2 + 1, n_sessions)
            items.append((s1, person, rng.choice(ch["before"]), ("before", ch["id"], person, None)))
            items.append((s2, person, rng.choice(ch["after"]), ("after", ch["id"], person, None)))
        for pl in plan:
            person = rng.choice(people)
            s1 = rng.randrange(0, n_sessions - 2)
            s2 = rng.randrange(s1 + 2, n_sessions)
            items.append((s1, person, rng.choice(pl["plan"]), ("plan", pl["id"], person, None)))
            items.append((s2, person, rng.choice(pl["done"]), ("done", pl["id"], person, None)))
        # Build sessions: evidence items interleaved with reactions and small talk.
        turns: list[dict] = []
        tag_turn: dict[tuple, str] = {}
        for s in range(n_sessions):
            mine = [it for it in items if it[0] == s]
            rng.shuffle(mine)
            target = rng.randint(*shape.turns)
            speaker_i = rng.randrange(len(people))
            script: list[tuple[str, str, tuple | None]] = []
            script.append((people[speaker_i], rng.choice(SMALLTALK), None))
            for _, person, text, tag in mine:
                script.append((person, text, tag))
                if tag and rng.random() < 0.5:
                    script.append((rng.choice([p for p in people if p != person]), rng.choice(REACTIONS), None))
            while len(script) < target:
                script.insert(rng.randrange(1, len(script) + 1), (rng.choice(people), rng.choice(SMALLTALK), None))
            while len(script) > shape.max_turns // n_sessions and any(x[2] is None for x in script[1:]):
                del script[max(i for i, x in enumerate(script) if x[2] is None)]
            for t, (speaker, text, tag) in enumerate(script, start=1):
                tid = f"{cid}-s{s + 1}-t{t:02d}"
                turns.append(
                    {"id": tid, "session": s + 1, "date": dates[s].isoformat(), "speaker": speaker, "text": text}
                )
                if tag:
                    tag_turn[tag[:3]] = tid
                    if tag[3]:
                        tag_turn[("rel", *tag[:3])] = tag[3]
        conversations.append(
            {
                "id": cid,
                # Tune on the odd-numbered conversations, report on the even-numbered ones too.
                "split": "held-out" if shape.split == "held-out" or c % 2 else "tuning",
                "people": people,
                "sessions": [{"session": i + 1, "date": d.isoformat()} for i, d in enumerate(dates)],
                "turns": turns,
            }
        )
        by_id = {t["id"]: t for t in turns}
        counts: dict[str, int] = {}
        for _person, ev, _ in told:
            counts[ev["id"]] = counts.get(ev["id"], 0) + 1
        # Questions.
        for person, ev, _ in told:
            tid = tag_turn[("event", ev["id"], person)]
            shared = counts[ev["id"]] > 1
            kind = "adversarial" if shared else "single-hop"
            for tmpl in ev["direct"]:
                ask(cid, kind, tmpl.format(p=person), [tid])
            ask(cid, "adversarial" if shared else "paraphrase", ev["para"][0].format(p=person), [tid])
            turn = by_id[tid]
            d = date.fromisoformat(turn["date"])
            rel = tag_turn.get(("rel", "event", ev["id"], person))
            if rng.random() < 0.5:
                when = rng.choice(["When did {p} {x}?", "On what date did {p} {x}?", "Roughly when did {p} {x}?"])
                ask(cid, "temporal", when.format(p=person, x=ev["past"]), [tid])
            if rel:
                if rel == "yesterday":
                    happened = d - timedelta(days=1)
                elif rel == "two days ago":
                    happened = d - timedelta(days=2)
                elif rel == "last Saturday":
                    happened = weekday_before(d, 5)
                else:
                    happened = weekday_before(d, 0)
                form = rng.choice(
                    [
                        "What did {p} do on {d}?",
                        "What happened to {p} on {d}?",
                        "Something happened for {p} on {d}. What was it?",
                    ]
                )
                ask(cid, "temporal", form.format(p=person, d=human(happened)), [tid])
            else:
                form = rng.choice(
                    [
                        "What news did {p} share on {d}?",
                        "What did {p} tell the others on {d}?",
                        "In the chat of {d}, what did {p} announce?",
                    ]
                )
                same_day = [
                    t["id"]
                    for t in turns
                    if t["date"] == turn["date"]
                    and t["speaker"] == person
                    and any(v == t["id"] for k, v in tag_turn.items() if k[0] != "rel" and k[2] == person)
                ]
                ask(cid, "temporal", form.format(p=person, d=human(d)), same_day or [tid])
        for ch in change:
            person = next(it[1] for it in items if it[3] and it[3][:2] == ("before", ch["id"]))
            ev = [tag_turn[("before", ch["id"], person)], tag_turn[("after", ch["id"], person)]]
            for tmpl in ch["q"]:
                ask(cid, "multi-hop", tmpl.format(p=person), ev)
            ask(cid, "paraphrase", ch["para"].format(p=person), ev)
        for pl in plan:
            person = next(it[1] for it in items if it[3] and it[3][:2] == ("plan", pl["id"]))
            ev = [tag_turn[("plan", pl["id"], person)], tag_turn[("done", pl["id"], person)]]
            ask(cid, "multi-hop", pl["q"][0].format(p=person), ev)
            ask(cid, "single-hop", pl["q"][1].format(p=person), [ev[1]])
            ask(cid, "paraphrase", pl["para"].format(p=person), ev)
        # "The week after": what did X share in the session after the one where Y happened.
        for person, ev, _ in told[:3]:
            tid = tag_turn[("event", ev["id"], person)]
            s = by_id[tid]["session"]
            later = [
                v
                for k, v in tag_turn.items()
                if k[0] in ("event", "after", "done", "before", "plan")
                and k[2] == person
                and by_id[v]["session"] == s + 1
            ]
            if later:
                form = rng.choice(
                    [
                        "What did {p} share the week after they {x}?",
                        "The session after {p} mentioned they {x}, what did {p} talk about?",
                    ]
                )
                past = ev["past"]
                ask(cid, "temporal", form.format(p=person, x=past_tense(past)), later)
        multi_entity(random.Random(f"{seed}-{cid}"), cid, told, tag_turn, by_id, counts, ask, shape.multi_entity)
        deferred.append((cid, people, told, tag_turn, by_id))
    # Aggregate questions come after all the others, from their own random stream, so the other
    # questions keep their ids.
    for cid, people, told, tag_turn, by_id in deferred:
        aggregate(random.Random(f"{seed}-aggregate-{cid}"), cid, people, told, tag_turn, by_id, ask, shape.aggregate)
    return {"seed": seed, "conversations": conversations, "questions": questions}


def multi_entity(
    rng: random.Random, cid: str, told: list, tag_turn: dict, by_id: dict, counts: dict, ask, wanted: int
) -> None:
    """`wanted` questions that ask about 2-4 news events at once, each told in a different session,
    by at least two different people: all@5 needs every one of the turns. Its own random stream
    (seeded by the conversation), so the other questions do not depend on it."""
    news = [(p, ev, tag_turn[("event", ev["id"], p)]) for p, ev, _ in told if counts[ev["id"]] == 1]
    made: set[tuple[str, ...]] = set()
    for _ in range(wanted * 20):
        if len(made) == wanted:
            break
        want = rng.choice([2, 2, 3, 3, 4])
        rng.shuffle(news)
        parts: list[tuple[str, dict, str]] = []
        for p, ev, tid in news:
            if all(by_id[tid]["session"] != by_id[t]["session"] for _, _, t in parts):
                parts.append((p, ev, tid))
            if len(parts) == want:
                break
        key = tuple(sorted(t for _, _, t in parts))
        if len(parts) < 2 or len({p for p, _, _ in parts}) < 2 or key in made:
            continue
        made.add(key)
        asked = [rng.choice(ev["direct"]).format(p=p).rstrip("?") for p, ev, _ in parts]
        asked = [asked[0]] + [a[0].lower() + a[1:] for a in asked[1:]]
        text = (", ".join(asked[:-1]) + (", and " if len(asked) > 2 else " and ") + asked[-1]) + "?"
        ask(cid, "multi-entity", text, [t for _, _, t in parts])


# Topics an aggregate question names (never the pieces): the events of each, and question forms
# ({who}: one person, "A and B", or "A, B and C"; {each}: " each" and {has}: "have" when several
# people are asked).
TOPICS: list[dict] = [
    dict(
        id="hobbies",
        events={"pottery", "guitar", "climbing", "chess", "language", "swim", "cooking", "garden", "podcast"},
        q=["What new hobbies {has} {who} taken on?", "Which pastimes did {who}{each} get into lately?"],
    ),
    dict(
        id="places",
        events={"marathon", "concert", "camping", "scuba"},
        q=["Which places {has} {who} been to recently?", "Where did {who}{each} go on their outings and trips?"],
    ),
    dict(
        id="milestones",
        events={"marathon", "exam", "scuba", "climbing", "promotion", "chess"},
        q=["What milestones did {who} reach?", "Which achievements did {who}{each} celebrate?"],
    ),
    dict(
        id="home",
        events={"puppy", "baby", "moving", "renovation", "wedding", "allergy"},
        q=["What family or household news did {who} have?", "What changed at home for {who}?"],
    ),
    dict(
        id="work",
        events={"promotion", "newjob", "podcast", "volunteer"},
        q=["What work news did {who} share?", "How are things at work for {who}?"],
    ),
    dict(
        id="health",
        events={"surgery", "allergy", "swim", "marathon"},
        q=["What health news did {who} share?", "How {has} {who} been doing physically?"],
    ),
    dict(
        id="outdoors",
        events={"camping", "garden", "swim", "marathon", "climbing", "scuba"},
        q=["What {has} {who} been doing outdoors?", "Which active things did {who}{each} do?"],
    ),
    dict(
        id="learning",
        events={"language", "guitar", "pottery", "exam", "scuba", "book"},
        q=["What {has} {who} been learning?", "Which skills did {who}{each} work on?"],
    ),
    dict(
        id="purchases",
        events={"guitar", "car", "moving", "renovation"},
        q=["What big things did {who} buy or spend on?", "Which purchases did {who}{each} make?"],
    ),
]


def aggregate(
    rng: random.Random, cid: str, people: list, told: list, tag_turn: dict, by_id: dict, ask, wanted: int
) -> None:
    """Up to `wanted` questions that name a topic and one or more people, never the pieces ("What new
    hobbies have Maya and Daniel taken up?"): the evidence is every news turn of those people about
    the topic, 2-4 turns in as many sessions about at least two different events. The small talk and
    reactions of the same sessions stay around them."""
    groups = [[p] for p in people] + [[a, b] for i, a in enumerate(people) for b in people[i + 1 :]]
    if len(people) == 3:
        groups.append(list(people))
    candidates = []
    for topic in TOPICS:
        for group in groups:
            ev = [(p, e) for p, e, _ in told if p in group and e["id"] in topic["events"]]
            turns = sorted({tag_turn[("event", e["id"], p)] for p, e in ev})
            sessions = {by_id[t]["session"] for t in turns}
            if 2 <= len(turns) <= 4 and len(sessions) == len(turns) and len({e["id"] for _, e in ev}) >= 2:
                if all(any(p == q for q, _ in ev) for p in group):  # every person named has a piece
                    candidates.append((topic, group, turns))
    rng.shuffle(candidates)
    made: set[tuple[str, ...]] = set()
    for topic, group, turns in candidates:
        if len(made) == wanted:
            break
        if tuple(turns) in made:
            continue
        made.add(tuple(turns))
        who = group[0] if len(group) == 1 else ", ".join(group[:-1]) + " and " + group[-1]
        several = len(group) > 1
        text = rng.choice(topic["q"]).format(who=who, each=" each" if several else "", has="have" if several else "has")
        ask(cid, "aggregate", text, turns)


_PAST = {
    "sign": "signed",
    "adopt": "adopted",
    "run": "ran",
    "get": "got",
    "buy": "bought",
    "plant": "planted",
    "finish": "finished",
    "bake": "baked",
    "have": "had",
    "start": "started",
    "see": "saw",
    "hear": "heard",
    "climb": "climbed",
    "accept": "accepted",
    "go": "went",
    "reach": "reached",
    "pass": "passed",
    "launch": "launched",
}


def past_tense(phrase: str) -> str:
    verb, _, rest = phrase.partition(" ")
    return f"{_PAST.get(verb, verb + 'ed')} {rest}"


def main(which: list[str]) -> None:
    """Write the named sets ("short", "long"; both when none is named)."""
    unknown = [w for w in which if w not in SETS]
    if unknown:
        raise SystemExit(f"unknown set {unknown[0]!r}: name short, long or none (both)")
    for name in which or list(SETS):
        shape, seed, file = SETS[name]
        write(build(seed, shape), Path(__file__).with_name(file))


def write(data: dict, out: Path) -> None:
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for q in data["questions"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    turns = [len(c["turns"]) for c in data["conversations"]]
    print(
        f"{out.name}: {len(data['conversations'])} conversations, turns {min(turns)}-{max(turns)}, "
        f"{len(data['questions'])} questions {kinds}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
