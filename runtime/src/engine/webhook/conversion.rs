//! `POST /convert`: the API server's ConversionReview, answered by the converters of the kinds
//! this operator serves in more than one version.
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

/// The path the CRDs' `clientConfig` names.
pub const PATH: &str = "/convert";

/// The largest ConversionReview accepted. A list read in a version other than the stored one
/// converts a whole page (500 objects by default) in one review, which outgrows axum's 2 MB
/// default with a few KB per job.
pub const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Converts one kind's objects between its served versions.
pub trait Converter: Send + Sync + std::fmt::Debug {
    /// The CRD's name, e.g. `mpijobs.kubeflow.org`.
    fn crd(&self) -> &str;

    /// The API group, e.g. `kubeflow.org`, and kind, e.g. `MPIJob`.
    fn group_kind(&self) -> (&str, &str);

    /// `object` in `desired_api_version`, e.g. `kubeflow.org/v1`; a message naming the field
    /// otherwise.
    fn convert(
        &self,
        object: serde_json::Value,
        desired_api_version: &str,
    ) -> Result<serde_json::Value, String>;
}

/// The converters, by kind.
pub type Converters = Arc<Vec<Arc<dyn Converter>>>;

/// The route, with `converters` as state.
pub fn router(converters: Converters) -> Router {
    Router::new()
        .route(PATH, post(convert_handler))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(converters)
}

async fn convert_handler(
    State(converters): State<Converters>,
    Json(review): Json<ConversionReview>,
) -> Json<ConversionReview> {
    let request = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => {
            return Json(
                ConversionResponse::invalid(Status::failure(&e.to_string(), "BadRequest")).into_review(),
            );
        }
    };
    Json(answer(&converters, request).into_review())
}

/// Converts every object of `request`, or fails the whole review naming the first object that
/// could not be converted (the API server wants all or nothing).
pub fn answer(converters: &[Arc<dyn Converter>], request: ConversionRequest) -> ConversionResponse {
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let response = ConversionResponse::for_request(request);
    let mut converted = Vec::with_capacity(objects.len());
    for object in objects {
        match convert_one(converters, object, &desired) {
            Ok(o) => converted.push(o),
            Err(message) => {
                tracing::warn!(%message, desired, "conversion failed");
                return response.failure(Status::failure(&message, "ConversionFailed"));
            }
        }
    }
    response.success(converted)
}

fn convert_one(
    converters: &[Arc<dyn Converter>],
    object: serde_json::Value,
    desired: &str,
) -> Result<serde_json::Value, String> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let (api_version, kind) = (text(&object["apiVersion"]), text(&object["kind"]));
    let name = text(&object["metadata"]["name"]);
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let converter = converters
        .iter()
        .find(|c| c.group_kind() == (group, kind.as_str()))
        .ok_or_else(|| format!("{api_version} {kind} {name}: this webhook converts no such kind"))?;
    if api_version == desired {
        return Ok(object);
    }
    converter
        .convert(object, desired)
        .map_err(|e| format!("{kind} {name} from {api_version} to {desired}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug)]
    struct Renamer;

    impl Converter for Renamer {
        fn crd(&self) -> &str {
            "foos.example.org"
        }
        fn group_kind(&self) -> (&str, &str) {
            ("example.org", "Foo")
        }
        fn convert(&self, mut o: serde_json::Value, to: &str) -> Result<serde_json::Value, String> {
            if o["spec"]["bad"] == json!(true) {
                return Err("spec.bad: set it to false".into());
            }
            o["apiVersion"] = json!(to);
            Ok(o)
        }
    }

    fn request(objects: Vec<serde_json::Value>) -> ConversionRequest {
        ConversionRequest {
            types: None,
            uid: "u1".into(),
            desired_api_version: "example.org/v2".into(),
            objects,
        }
    }

    fn foo(version: &str, bad: bool) -> serde_json::Value {
        json!({"apiVersion": format!("example.org/{version}"), "kind": "Foo", "metadata": {"name": "a"}, "spec": {"bad": bad}})
    }

    #[tokio::test]
    async fn a_page_of_large_objects_is_converted() {
        use axum::body::Body;
        use axum::http::Request;
        use http_body_util::BodyExt;
        use tower::ServiceExt;

        // 500 objects of 8 KB: 4 MB, twice axum's default limit.
        let mut object = foo("v1", false);
        object["spec"]["padding"] = json!("x".repeat(8 * 1024));
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": "example.org/v2", "objects": vec![object; 500]},
        });
        let body = serde_json::to_vec(&review).unwrap();
        assert!(body.len() > 4_000_000);
        let request = Request::post(PATH)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = router(Arc::new(vec![Arc::new(Renamer)]))
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), axum::http::StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            answer["response"]["convertedObjects"].as_array().unwrap().len(),
            500
        );
    }

    #[test]
    fn converts_all_or_fails_naming_the_object() {
        let converters: Vec<Arc<dyn Converter>> = vec![Arc::new(Renamer)];
        let ok = answer(&converters, request(vec![foo("v1", false), foo("v2", false)]));
        let ok = serde_json::to_value(ok).unwrap();
        assert_eq!(ok["uid"], "u1");
        assert_eq!(ok["result"]["status"], "Success");
        assert_eq!(ok["convertedObjects"][0]["apiVersion"], "example.org/v2");
        assert_eq!(ok["convertedObjects"][1]["apiVersion"], "example.org/v2");

        let failed = serde_json::to_value(answer(&converters, request(vec![foo("v1", true)]))).unwrap();
        assert_eq!(failed["result"]["status"], "Failure");
        let message = failed["result"]["message"].as_str().unwrap();
        assert!(
            message.contains("Foo a from example.org/v1 to example.org/v2: spec.bad"),
            "{message}"
        );

        let unknown = json!({"apiVersion": "other.org/v1", "kind": "Bar", "metadata": {"name": "b"}});
        let failed = serde_json::to_value(answer(&converters, request(vec![unknown]))).unwrap();
        assert_eq!(failed["result"]["status"], "Failure");
    }
}
