"""Word lists the generators fill their templates with.

Every entry is a single whitespace-free word, so that a word-level tokenizer maps it to
one token and an answer such as ``" Mary"`` is one token. Order matters: the split
partition (``_common.partition``) is a fixed permutation of these tuples, so appending
words moves nothing already assigned, but reordering or deleting changes every split
and needs a generator version bump.
"""

from __future__ import annotations

__all__: list[str] = []

FIRST_NAMES: tuple[str, ...] = (
    "Aaron", "Adam", "Alan", "Albert", "Alex", "Alice", "Amanda", "Amy", "Andrew", "Angela",
    "Anna", "Anthony", "Arthur", "Ashley", "Barbara", "Ben", "Benjamin", "Beth", "Betty", "Bill",
    "Bob", "Brad", "Brandon", "Brian", "Bruce", "Carl", "Carol", "Caroline", "Catherine", "Charles",
    "Charlie", "Chris", "Christina", "Claire", "Colin", "Craig", "Daniel", "Danny", "David", "Dennis",
    "Diana", "Donald", "Donna", "Dorothy", "Douglas", "Dylan", "Edward", "Elaine", "Eleanor", "Elizabeth",
    "Ellen", "Emily", "Emma", "Eric", "Ethan", "Eva", "Evelyn", "Frank", "Fred", "Gary",
    "George", "Gerald", "Grace", "Greg", "Hannah", "Harold", "Harry", "Heather", "Helen", "Henry",
    "Ian", "Isaac", "Jack", "Jacob", "James", "Jane", "Janet", "Jason", "Jeff", "Jennifer",
    "Jeremy", "Jerry", "Jessica", "Jim", "Joan", "Joe", "John", "Jonathan", "Joseph", "Joshua",
    "Joyce", "Julia", "Julie", "Justin", "Karen", "Kate", "Keith", "Kelly", "Kevin", "Kyle",
    "Larry", "Laura", "Lauren", "Leo", "Linda", "Lisa", "Louis", "Lucy", "Luke", "Margaret",
    "Maria", "Marie", "Mark", "Martha", "Martin", "Mary", "Matthew", "Megan", "Melissa", "Michael",
    "Michelle", "Mike", "Nancy", "Natalie", "Nathan", "Nick", "Nicole", "Noah", "Oliver", "Oscar",
    "Pamela", "Patricia", "Patrick", "Paul", "Peter", "Philip", "Rachel", "Ralph", "Raymond", "Rebecca",
    "Richard", "Robert", "Roger", "Ronald", "Rose", "Roy", "Russell", "Ruth", "Ryan", "Samuel",
    "Sandra", "Sara", "Scott", "Sean", "Sharon", "Simon", "Sophie", "Stephen", "Steven", "Susan",
    "Teresa", "Thomas", "Tim", "Timothy", "Tom", "Tony", "Victoria", "Vincent", "Walter", "Wayne",
    "William", "Zoe", "Hugo", "Ivan", "Felix", "Max", "Sam", "Leon", "Lily", "Nina",
    "Olivia", "Paula", "Quentin", "Rita", "Stella", "Tara", "Ursula", "Vera", "Wendy", "Xavier",
    "Yvonne", "Zach", "Gloria", "Irene", "Jade", "Kirk", "Logan", "Mason", "Owen", "Ruby",
    "Troy", "Violet", "Wade", "Abby", "Bella", "Cody", "Dean", "Eddie", "Fiona", "Gavin",
)  # fmt: skip

PLACES: tuple[str, ...] = (
    "store", "market", "park", "school", "library", "hospital", "station", "airport", "museum", "restaurant",
    "cafe", "bakery", "theater", "beach", "garden", "office", "church", "bank", "gym", "pharmacy",
    "zoo", "farm", "lake", "river", "castle", "harbor", "stadium", "mall", "hotel", "university",
    "cinema", "bookstore", "pool", "factory", "studio", "gallery", "village", "forest", "mountain", "island",
    "clinic", "kitchen", "garage", "campus", "courthouse", "warehouse", "bar", "diner", "pub", "temple",
    "palace", "laboratory", "playground", "supermarket", "canteen", "bridge", "square", "harbour", "barn",
    "cottage",
)  # fmt: skip

# Consonant-initial, so that the IOI templates' "a {object}" is always grammatical.
OBJECTS: tuple[str, ...] = (
    "book", "pen", "bottle", "cake", "ball", "key", "letter", "ring", "basket", "necklace",
    "drink", "bag", "hat", "computer", "phone", "bone", "box", "candle", "card", "chair",
    "coin", "cookie", "cup", "doll", "flower", "gift", "guitar", "hammer", "knife", "lamp",
    "map", "mirror", "notebook", "painting", "pencil", "pillow", "plate", "puzzle", "radio", "rope",
    "sandwich", "scarf", "shirt", "shoe", "sock", "spoon", "ticket", "towel", "toy", "watch",
    "wallet", "jacket", "camera", "blanket", "bracelet", "brush", "bucket", "candy", "kite", "ladder",
)  # fmt: skip

# The eleven colours of the MCQA task (MIB App. D.3 samples distractors from a set of 11).
COLOURS: tuple[str, ...] = (
    "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white", "gray",
)  # fmt: skip

# Objects with an agreed prototypical colour, one word each.
COLOURED_OBJECTS: tuple[tuple[str, str], ...] = (
    ("strawberry", "red"), ("tomato", "red"), ("cherry", "red"), ("ruby", "red"), ("firetruck", "red"),
    ("ladybug", "red"), ("brick", "red"), ("raspberry", "red"), ("radish", "red"), ("cardinal", "red"),
    ("carrot", "orange"), ("pumpkin", "orange"), ("tangerine", "orange"), ("apricot", "orange"),
    ("goldfish", "orange"), ("basketball", "orange"), ("mandarin", "orange"), ("papaya", "orange"),
    ("banana", "yellow"), ("lemon", "yellow"), ("corn", "yellow"), ("sunflower", "yellow"),
    ("canary", "yellow"), ("butter", "yellow"), ("yolk", "yellow"), ("daffodil", "yellow"),
    ("taxi", "yellow"), ("grass", "green"), ("lettuce", "green"), ("broccoli", "green"),
    ("cucumber", "green"), ("lime", "green"), ("frog", "green"), ("leaf", "green"), ("pea", "green"),
    ("spinach", "green"), ("emerald", "green"), ("celery", "green"), ("sky", "blue"), ("ocean", "blue"),
    ("sapphire", "blue"), ("blueberry", "blue"), ("jeans", "blue"), ("sea", "blue"), ("bluebell", "blue"),
    ("denim", "blue"), ("eggplant", "purple"), ("grape", "purple"), ("lavender", "purple"),
    ("plum", "purple"), ("violet", "purple"), ("amethyst", "purple"), ("lilac", "purple"),
    ("flamingo", "pink"), ("bubblegum", "pink"), ("salmon", "pink"), ("shrimp", "pink"),
    ("carnation", "pink"), ("piglet", "pink"), ("grapefruit", "pink"), ("chocolate", "brown"),
    ("coffee", "brown"), ("walnut", "brown"), ("acorn", "brown"), ("cinnamon", "brown"),
    ("potato", "brown"), ("soil", "brown"), ("mud", "brown"), ("coal", "black"), ("crow", "black"),
    ("tire", "black"), ("raven", "black"), ("ink", "black"), ("licorice", "black"), ("panther", "black"),
    ("asphalt", "black"), ("snow", "white"), ("milk", "white"), ("cloud", "white"), ("salt", "white"),
    ("sugar", "white"), ("chalk", "white"), ("swan", "white"), ("rice", "white"), ("elephant", "gray"),
    ("rhino", "gray"), ("pebble", "gray"), ("ash", "gray"), ("concrete", "gray"), ("dolphin", "gray"),
    ("pigeon", "gray"), ("steel", "gray"), ("koala", "gray"),
)  # fmt: skip

# Cities with one-word country, continent and language values (RAVEL-style retrieval).
CITIES: tuple[tuple[str, str, str, str], ...] = (
    ("Paris", "France", "Europe", "French"), ("Lyon", "France", "Europe", "French"),
    ("Marseille", "France", "Europe", "French"), ("Berlin", "Germany", "Europe", "German"),
    ("Munich", "Germany", "Europe", "German"), ("Hamburg", "Germany", "Europe", "German"),
    ("Rome", "Italy", "Europe", "Italian"), ("Milan", "Italy", "Europe", "Italian"),
    ("Naples", "Italy", "Europe", "Italian"), ("Madrid", "Spain", "Europe", "Spanish"),
    ("Barcelona", "Spain", "Europe", "Spanish"), ("Seville", "Spain", "Europe", "Spanish"),
    ("Lisbon", "Portugal", "Europe", "Portuguese"), ("Porto", "Portugal", "Europe", "Portuguese"),
    ("Warsaw", "Poland", "Europe", "Polish"), ("Krakow", "Poland", "Europe", "Polish"),
    ("Athens", "Greece", "Europe", "Greek"), ("Stockholm", "Sweden", "Europe", "Swedish"),
    ("Oslo", "Norway", "Europe", "Norwegian"), ("Moscow", "Russia", "Europe", "Russian"),
    ("Tokyo", "Japan", "Asia", "Japanese"), ("Osaka", "Japan", "Asia", "Japanese"),
    ("Kyoto", "Japan", "Asia", "Japanese"), ("Beijing", "China", "Asia", "Chinese"),
    ("Shanghai", "China", "Asia", "Chinese"), ("Seoul", "Korea", "Asia", "Korean"),
    ("Busan", "Korea", "Asia", "Korean"), ("Bangkok", "Thailand", "Asia", "Thai"),
    ("Hanoi", "Vietnam", "Asia", "Vietnamese"), ("Jakarta", "Indonesia", "Asia", "Indonesian"),
    ("Cairo", "Egypt", "Africa", "Arabic"), ("Alexandria", "Egypt", "Africa", "Arabic"),
    ("Nairobi", "Kenya", "Africa", "Swahili"), ("Mombasa", "Kenya", "Africa", "Swahili"),
    ("Dakar", "Senegal", "Africa", "French"), ("Luanda", "Angola", "Africa", "Portuguese"),
    ("Maputo", "Mozambique", "Africa", "Portuguese"), ("Casablanca", "Morocco", "Africa", "Arabic"),
    ("Tunis", "Tunisia", "Africa", "Arabic"), ("Bamako", "Mali", "Africa", "French"),
    ("Sydney", "Australia", "Oceania", "English"), ("Melbourne", "Australia", "Oceania", "English"),
    ("Perth", "Australia", "Oceania", "English"), ("Brisbane", "Australia", "Oceania", "English"),
    ("Adelaide", "Australia", "Oceania", "English"), ("Toronto", "Canada", "America", "English"),
    ("Montreal", "Canada", "America", "French"), ("Chicago", "USA", "America", "English"),
    ("Boston", "USA", "America", "English"), ("Houston", "USA", "America", "English"),
    ("Guadalajara", "Mexico", "America", "Spanish"), ("Monterrey", "Mexico", "America", "Spanish"),
    ("Lima", "Peru", "America", "Spanish"), ("Cusco", "Peru", "America", "Spanish"),
    ("Bogota", "Colombia", "America", "Spanish"), ("Medellin", "Colombia", "America", "Spanish"),
    ("Santiago", "Chile", "America", "Spanish"), ("Recife", "Brazil", "America", "Portuguese"),
    ("Salvador", "Brazil", "America", "Portuguese"), ("Rosario", "Argentina", "America", "Spanish"),
)  # fmt: skip
