-- The shop's database: customers, their orders, refunds, and the cards on file (never shown to the agent).
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    item TEXT NOT NULL,
    total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
    status TEXT NOT NULL CHECK (status IN ('paid', 'shipped', 'delivered', 'refunded'))
);
CREATE TABLE refunds (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL UNIQUE REFERENCES orders(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason TEXT NOT NULL
);
CREATE TABLE payment_cards (
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    last4 TEXT NOT NULL,
    token TEXT NOT NULL
);

INSERT INTO customers (id, name, email) VALUES
    (1, 'Dana Whitfield', 'dana@example.com'),
    (2, 'Omar Haddad', 'omar@example.com'),
    (3, 'Lena Fischer', 'lena@example.com');
INSERT INTO orders (id, customer_id, item, total_cents, status) VALUES
    (1041, 1, 'Rain jacket', 12900, 'delivered'),
    (1042, 1, 'Trail shoes', 8999, 'delivered'),
    (1043, 2, 'Trail shoes', 8999, 'shipped'),
    (1044, 3, 'Wool socks', 1500, 'paid');
INSERT INTO payment_cards (customer_id, last4, token) VALUES
    (1, '4242', 'tok_dana_live'),
    (2, '1881', 'tok_omar_live'),
    (3, '0005', 'tok_lena_live');
