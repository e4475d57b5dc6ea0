//! Placement of new nodes: [`Canvas::place`], the first free top-left corner for a node
//! of a given size. The rule it follows is stated in the canvas module docs (`mod.rs`).

use super::{Canvas, Position, Size, PLACEMENT_GAP, ROW_WIDTH};

impl Canvas {
    /// The first free top-left corner for a node of `size` (the rule is in the canvas module docs, `mod.rs`).
    pub(super) fn place(&self, size: Size) -> Position {
        let rects: Vec<(Position, Size)> = self
            .nodes
            .iter()
            .map(|n| (self.absolute_position(n), n.size))
            .collect();
        let candidates = |edges: Vec<f64>| {
            let mut values: Vec<f64> = std::iter::once(0.0)
                .chain(edges)
                .filter(|v| *v >= 0.0)
                .collect();
            values.sort_by(f64::total_cmp);
            values.dedup();
            values
        };
        let ys = candidates(
            rects
                .iter()
                .map(|(p, s)| p.y + s.height + PLACEMENT_GAP)
                .collect(),
        );
        let xs = candidates(
            rects
                .iter()
                .map(|(p, s)| p.x + s.width + PLACEMENT_GAP)
                .collect(),
        );
        for &y in &ys {
            // Only nodes reaching into this row (with the gap) can be in the way.
            let in_row: Vec<&(Position, Size)> = rects
                .iter()
                .filter(|(p, s)| {
                    y < p.y + s.height + PLACEMENT_GAP && p.y < y + size.height + PLACEMENT_GAP
                })
                .collect();
            for &x in &xs {
                if x > 0.0 && x + size.width > ROW_WIDTH {
                    break;
                }
                let clear = in_row.iter().all(|(p, s)| {
                    !(x < p.x + s.width + PLACEMENT_GAP && p.x < x + size.width + PLACEMENT_GAP)
                });
                if clear {
                    return Position { x, y };
                }
            }
        }
        // Not reached (the last row is below everything); kept so no input can panic.
        let bottom = rects
            .iter()
            .map(|(p, s)| p.y + s.height + PLACEMENT_GAP)
            .fold(0.0, f64::max);
        Position { x: 0.0, y: bottom }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{args, open, project};
    use super::*;
    use crate::host::canvas::NodeKind;
    use serde_json::json;
    use std::fs;

    fn overlaps(a: (Position, Size), b: (Position, Size)) -> bool {
        a.0.x < b.0.x + b.1.width
            && b.0.x < a.0.x + a.1.width
            && a.0.y < b.0.y + b.1.height
            && b.0.y < a.0.y + a.1.height
    }

    #[test]
    fn new_nodes_never_overlap_existing_ones() {
        let dir = project("placement");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let first = open(&mut canvas, "terminal_open", json!({}));
        assert_eq!(
            canvas.node(&first).unwrap().position,
            Position { x: 0.0, y: 0.0 }
        );
        // The next one goes to the right, one gap away.
        let second = open(&mut canvas, "terminal_open", json!({}));
        assert_eq!(
            canvas.node(&second).unwrap().position,
            Position {
                x: 760.0 + PLACEMENT_GAP,
                y: 0.0
            }
        );
        // A grouped node and a node moved into the way must be avoided too.
        let grouped = open(&mut canvas, "sticky_open", json!({"text": "g"}));
        open(&mut canvas, "canvas_group", json!({"nodeIds": [grouped]}));
        let moved = open(
            &mut canvas,
            "browser_open",
            json!({"url": "https://a.example"}),
        );
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": moved, "x": 300, "y": 650})),
            )
            .unwrap();
        for n in 0..12 {
            let kind = ["terminal_open", "sticky_open", "browser_open"][n % 3];
            open(
                &mut canvas,
                kind,
                json!({"text": "t", "url": "https://b.example"}),
            );
        }
        let rects: Vec<(String, Position, Size)> = canvas
            .nodes()
            .iter()
            .filter(|n| n.kind != NodeKind::Group)
            .map(|n| (n.id.clone(), canvas.absolute_position(n), n.size))
            .collect();
        for (i, a) in rects.iter().enumerate() {
            for b in &rects[i + 1..] {
                assert!(
                    !overlaps((a.1, a.2), (b.1, b.2)),
                    "{} overlaps {}",
                    a.0,
                    b.0
                );
            }
        }
        for node in canvas.nodes().iter().filter(|n| n.parent_id.is_none()) {
            assert!(
                node.kind == NodeKind::Group
                    || node.position.x + node.size.width <= ROW_WIDTH
                    || node.position.x == 0.0
                    || node.id == moved
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn placement_is_deterministic() {
        let place_all = |name: &str| {
            let dir = project(name);
            let mut canvas = Canvas::load(&dir, None).unwrap();
            for _ in 0..6 {
                open(
                    &mut canvas,
                    "browser_open",
                    json!({"url": "https://x.example"}),
                );
            }
            let positions: Vec<Position> = canvas.nodes().iter().map(|n| n.position).collect();
            fs::remove_dir_all(dir).unwrap();
            positions
        };
        let positions = place_all("determinism-a");
        assert_eq!(positions, place_all("determinism-b"));
        // 960 wide: two fit in a 2400 row, the third starts the next row.
        assert_eq!(
            positions[2],
            Position {
                x: 0.0,
                y: 640.0 + PLACEMENT_GAP
            }
        );
    }
}
