//! Decoding images: JPEG through libjpeg-turbo with Pillow's settings, and the other formats
//! through the image crate.
pub(crate) mod jpeg;
pub(crate) mod rgb;
